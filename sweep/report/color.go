package report

import "image/color"

// plotColor returns the i-th colour of a small fixed palette (blue, grey,
// red), chosen to stay readable when printed in greyscale.
func plotColor(i int) color.Color {
	switch i {
	case 0:
		return color.RGBA{R: 0x1f, G: 0x5f, B: 0xbf, A: 0xff}
	case 1:
		return color.RGBA{R: 0x80, G: 0x80, B: 0x80, A: 0xff}
	default:
		return color.RGBA{R: 0xcc, G: 0x22, B: 0x22, A: 0xff}
	}
}

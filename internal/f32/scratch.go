package f32

import "fmt"

// NewScratch returns a float32 Packed with room for any shape up to
// maxK×maxN, for products whose right-hand side changes on every call:
// attention packs a head's keys (and values) into one, then multiplies a
// block of query rows by it with MulAdd, the same kernels as the weight
// products. Reshape picks the shape of each use; SetColumn and SetRow fill
// it. A scratch is not safe for concurrent filling.
func NewScratch(maxK, maxN int) *Packed {
	return newPacked(maxK, maxN, false)
}

// Reshape makes p a k×n matrix over the same memory, for refilling. The
// contents are unspecified until every row (or column) in use is set.
// It panics if k×n needs more panels than p holds or p is bfloat16.
func (p *Packed) Reshape(k, n int) {
	need := (n + PanelWidth - 1) / PanelWidth * k * PanelWidth
	if p.half != nil || k < 0 || n < 0 || need > len(p.data) {
		panic(fmt.Sprintf("f32: Reshape to %d×%d does not fit a float32 scratch of %d floats", k, n, len(p.data)))
	}
	p.k, p.n = k, n
}

// SetColumn sets column j of p (one value per row k < K) from col: with
// keys as columns, a key vector of head dimension K is one column.
func (p *Packed) SetColumn(j int, col []float32) {
	col = col[:p.k]
	if j < 0 || j >= p.n {
		panic(fmt.Sprintf("f32: SetColumn %d of %d", j, p.n))
	}
	base := (j/PanelWidth)*p.k*PanelWidth + j%PanelWidth
	for kk, v := range col {
		p.data[base+kk*PanelWidth] = v
	}
}

// SetRow sets row kk of p (N values) from row: with keys as rows, a value
// vector is one row.
func (p *Packed) SetRow(kk int, row []float32) {
	row = row[:p.n]
	if kk < 0 || kk >= p.k {
		panic(fmt.Sprintf("f32: SetRow %d of %d", kk, p.k))
	}
	for j0 := 0; j0 < p.n; j0 += PanelWidth {
		base := (j0/PanelWidth)*p.k*PanelWidth + kk*PanelWidth
		copy(p.data[base:base+PanelWidth], row[j0:min(j0+PanelWidth, p.n)])
	}
}

package model

import "math"

// InvFreq returns the rotary inverse frequencies, one per pair of head
// dimensions (HeadDim/2 of them), in float64: base^(−2i/HeadDim), with
// Llama 3's scaling applied when the config has one
// (transformers' _compute_default_rope_parameters and
// _compute_llama3_parameters). Hugging Face computes them in float32; the
// goldens, and every backend here, keep float64 and round only cos and
// sin of the angle pos·inv_freq, which a float32 angle would miss by up to
// 2e-4 at 2,000 positions.
func (c *Config) InvFreq() []float64 {
	if !c.Rotary {
		return nil
	}
	half := c.HeadDim / 2
	inv := make([]float64, half)
	for i := range inv {
		inv[i] = 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(c.HeadDim))
	}
	if f := c.RopeFreqFactors; len(f) == half {
		for i := range inv {
			inv[i] /= f[i]
		}
		return inv
	}
	s := c.RopeScaling
	if s == (Llama3Scaling{}) {
		return inv
	}
	old := float64(s.OriginalMaxPositions)
	lowWavelen := old / s.LowFreqFactor
	highWavelen := old / s.HighFreqFactor
	for i, f := range inv {
		wavelen := 2 * math.Pi / f
		switch {
		case wavelen < highWavelen: // high frequency: kept
		case wavelen > lowWavelen: // low frequency: scaled down
			inv[i] = f / s.Factor
		default: // in between: interpolated
			smooth := (old/wavelen - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
			inv[i] = (1-smooth)*f/s.Factor + smooth*f
		}
	}
	return inv
}

// RopeAngles fills cos and sin (each HeadDim/2 long) for position pos:
// the angle pos·inv[i] in float64, then rounded to float32. Query and key
// dimension i and i+HeadDim/2 rotate together by angle i.
func RopeAngles(cos, sin []float32, inv []float64, pos int) {
	for i, f := range inv {
		s, c := math.Sincos(float64(pos) * f)
		cos[i], sin[i] = float32(c), float32(s)
	}
}

func sqrtInt(n int) float64 { return math.Sqrt(float64(n)) }

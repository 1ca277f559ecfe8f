package loadgen

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTimeoutDuration: seconds convert to a Duration exactly where one can
// hold them, and are refused elsewhere rather than overflowing or rounding
// to zero (which LoadOptions reads as the 300 s default).
func TestTimeoutDuration(t *testing.T) {
	for _, c := range []struct {
		s    float64
		want time.Duration
	}{{300, 300 * time.Second}, {0.05, 50 * time.Millisecond}, {1e-9, time.Nanosecond}, {9e9, time.Duration(9e9 * float64(time.Second))}} {
		d, err := TimeoutDuration(c.s)
		require.NoError(t, err, c.s)
		assert.Equal(t, c.want, d, c.s)
		assert.Positive(t, d)
	}
	for _, s := range []float64{0, -1, math.NaN(), 4e-10, 9.3e9, math.Inf(1)} {
		_, err := TimeoutDuration(s)
		assert.Error(t, err, s)
	}
}

package loadgen

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func snapshotWith(success float64) MetricsSnapshot {
	return MetricsSnapshot{Available: true, Values: map[string]float64{successMetric: success}}
}

func TestSettledAfter(t *testing.T) {
	before := snapshotWith(10)
	t.Run("waits until every answered request is counted", func(t *testing.T) {
		seen := []float64{12, 13, 14, 15}
		i := 0
		s, n, unsettled := settledAfter(context.Background(), before, 4, time.Minute, 0, func() MetricsSnapshot {
			v := seen[i]
			i++
			return snapshotWith(v)
		})
		assert.Equal(t, 14.0, s.Values[successMetric])
		assert.Equal(t, 3, n)
		assert.False(t, unsettled)
	})
	t.Run("other clients' requests count too", func(t *testing.T) {
		_, n, unsettled := settledAfter(context.Background(), before, 4, time.Minute, 0, func() MetricsSnapshot { return snapshotWith(30) })
		assert.Equal(t, 1, n)
		assert.False(t, unsettled)
	})
	t.Run("gives up at the deadline and says so", func(t *testing.T) {
		s, n, unsettled := settledAfter(context.Background(), before, 4, 0, 0, func() MetricsSnapshot { return snapshotWith(11) })
		assert.Equal(t, 11.0, s.Values[successMetric])
		assert.Equal(t, 1, n)
		assert.True(t, unsettled)
	})
	t.Run("a cancelled sweep stops waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, unsettled := settledAfter(ctx, before, 4, time.Minute, time.Hour, func() MetricsSnapshot { return snapshotWith(11) })
		assert.True(t, unsettled)
	})
	t.Run("a server without the counter gets one scrape", func(t *testing.T) {
		for name, tc := range map[string]struct{ before, after MetricsSnapshot }{
			"no counter after":  {before, MetricsSnapshot{Available: true, Values: map[string]float64{}}},
			"no counter before": {MetricsSnapshot{Available: true}, snapshotWith(1)},
			"no /metrics":       {MetricsSnapshot{}, MetricsSnapshot{Error: "HTTP 404"}},
		} {
			n := 0
			_, scrapes, unsettled := settledAfter(context.Background(), tc.before, 4, time.Minute, time.Hour, func() MetricsSnapshot {
				n++
				return tc.after
			})
			assert.Equal(t, 1, scrapes, name)
			assert.Equal(t, 1, n, name)
			assert.False(t, unsettled, name)
		}
	})
}

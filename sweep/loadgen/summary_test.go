package loadgen

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSanitize(t *testing.T) {
	in := map[string]any{
		"api_key":    "k1",
		"x-token":    "k2",
		"password":   "k3",
		"tokens":     5, // not a secret: "tokens" is not the word "token"
		"max_tokens": 16,
		"url":        "http://user:pw@host:8000/v1/completions?api_key=k4&model=m",
		"header":     "Bearer k5",
		"nested":     map[string]any{"list": []any{"--api-key", "k6", "--port", "8000", "--token=k7", "plain"}},
	}
	out := Sanitize(in).(map[string]any)
	b, _ := json.Marshal(out)
	for _, secret := range []string{"k1", "k2", "k3", "k4", "k5", "k6", "k7", "pw"} {
		assert.NotContains(t, string(b), `"`+secret, secret)
		assert.NotContains(t, string(b), secret+`"`, secret)
	}
	assert.Equal(t, 5, out["tokens"])
	assert.Equal(t, 16, out["max_tokens"])
	assert.Equal(t, []any{"--api-key", Redacted, "--port", "8000", "--token=" + Redacted, "plain"}, out["nested"].(map[string]any)["list"])
	assert.Contains(t, out["url"], "host:8000/v1/completions")
	assert.Contains(t, out["url"], "model=m")
	assert.Equal(t, "http://localhost:8000/v1/completions", Sanitize("http://localhost:8000/v1/completions"))
}

func TestSummarizeAndGoodput(t *testing.T) {
	ok := func(lat, ttft float64, tpot *float64, out int) Record {
		return Record{Status: 200, LatencyS: lat, TTFTS: &ttft, TPOTS: tpot, OutputTokens: &out, InterChunkS: []float64{0.1}}
	}
	recs := []Record{
		ok(1, 0.1, f64(0.01), 10),
		ok(2, 0.3, f64(0.01), 20),
		ok(3, 0.1, nil, 1), // one token: no TPOT, so it cannot show it met a TPOT SLO
		{Status: 500, LatencyS: 9},
		{Status: StatusError, LatencyS: 9},
	}
	s := Summarize(SummaryConfig{Concurrency: 2, SLO: &SLO{TTFTS: 0.2, TPOTS: 0.05}}, recs, 10)
	assert.Equal(t, Counts{Attempted: 5, Successful: 3, Failed: 2, OutputTokens: 31}, s.Counts)
	assert.InDelta(t, 0.3, *s.RequestThroughput, 1e-12)
	assert.InDelta(t, 3.1, *s.OutputTokenThroughput, 1e-12)
	assert.Equal(t, 3, s.LatencyS.Count, "failures are not in distributions")
	assert.Equal(t, 2.0, *s.LatencyS.P50)
	assert.Equal(t, 2, s.TPOTS.Count)
	assert.Equal(t, 3, s.InterChunkS.Count)
	require.NotNil(t, s.Goodput)
	assert.Equal(t, 1, s.Goodput.Met)
	assert.InDelta(t, 0.2, *s.Goodput.Fraction, 1e-12)
	assert.InDelta(t, 1.0, *s.Goodput.OutputTokensPer, 1e-12)

	z := Summarize(SummaryConfig{}, nil, 0)
	assert.Nil(t, z.RequestThroughput)
	assert.Nil(t, z.Goodput)
	b, err := json.Marshal(z)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"latency_s":{"count":0,"mean":null`)
}

func TestParseSLO(t *testing.T) {
	s, err := ParseSLO([]string{"ttft=0.2", "tpot=0.05", "latency=3"})
	require.NoError(t, err)
	assert.Equal(t, SLO{TTFTS: 0.2, TPOTS: 0.05, LatencyS: 3}, s)
	for _, bad := range []string{"ttft", "ttft=-1", "ttft=x", "foo=1", "ttft=nan", "tpot=NaN", "latency=inf"} {
		_, err := ParseSLO([]string{bad})
		assert.ErrorContains(t, err, bad)
	}
}

func TestStatusJSON(t *testing.T) {
	for _, s := range []Status{200, 503, StatusError} {
		b, err := json.Marshal(s)
		require.NoError(t, err)
		var back Status
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, s, back)
	}
	b, _ := json.Marshal(StatusError)
	assert.Equal(t, `"error"`, string(b))
	var s Status
	assert.Error(t, json.Unmarshal([]byte(`"weird"`), &s))
}

package cpu

import (
	"testing"

	"github.com/tinyserve/tinyserve/llm/model"
)

// gpt2Config is a GPT-2 shape for tests (see model.GPT2Config).
func gpt2Config(vocab, positions, width, layers, heads int) model.Config {
	return model.GPT2Config(vocab, positions, width, layers, heads)
}

// randomModel generates a model of shape c from seed with weight scale std.
func randomModel(t testing.TB, name string, c model.Config, seed uint64, std float64) *model.Model {
	t.Helper()
	m, err := model.NewRandom(name, c, model.RandomOptions{Seed: seed, Std: std})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// builtin generates a built-in model.
func builtin(t testing.TB, name string) *model.Model {
	t.Helper()
	m, err := model.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// smallModel is a GPT-2 small enough to check by hand: vocabulary 11, 8
// positions, width 4, 2 layers of 2 heads, weight scale 0.5.
func smallModel(t testing.TB) *model.Model {
	t.Helper()
	c := gpt2Config(11, 8, 4, 2, 2)
	c.BOSTokenID, c.EOSTokenIDs = 10, []int{10}
	return randomModel(t, "small", c, 7, 0.5)
}

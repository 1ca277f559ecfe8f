package tinyserve

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm/tokenizer"
	"github.com/tinyserve/tinyserve/openai"
)

// TestChatMatchesCompletionOfRenderedPrompt: on qwen3-tiny, whose folder
// carries a chat template, a greedy chat completion continues exactly as
// /v1/completions does on the prompt /tokenize renders from the same
// messages, with add_special_tokens false.
func TestChatMatchesCompletionOfRenderedPrompt(t *testing.T) {
	e, err := Open(context.Background(), Config{Model: "testdata/qwen3-tiny", Tokenizer: tokenizer.BuiltinQwen})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	srv := httptest.NewServer(openai.NewHandler(e))
	defer srv.Close()
	post := func(path, body string, out any) {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			json.NewDecoder(resp.Body).Decode(&out)
			t.Fatalf("%s: status %d %v", path, resp.StatusCode, out)
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	msgs := `[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello!"}]`
	var tok struct{ Tokens []int }
	post("/tokenize", `{"messages":`+msgs+`,"chat_template_kwargs":{"enable_thinking":false}}`, &tok)
	var chat struct {
		Choices []struct{ Message struct{ Content string } }
	}
	post("/v1/chat/completions", `{"messages":`+msgs+`,"max_tokens":8,"temperature":0,"ignore_eos":true,"chat_template_kwargs":{"enable_thinking":false}}`, &chat)
	ids, _ := json.Marshal(tok.Tokens)
	var cmpl struct {
		Choices []struct{ Text string }
	}
	post("/v1/completions", `{"prompt":`+string(ids)+`,"max_tokens":8,"temperature":0,"ignore_eos":true}`, &cmpl)
	if chat.Choices[0].Message.Content != cmpl.Choices[0].Text {
		t.Errorf("chat %q, completion of the rendered prompt %q", chat.Choices[0].Message.Content, cmpl.Choices[0].Text)
	}
	if !strings.Contains(e.Tokenizer().Decode(tok.Tokens, false), "<|im_start|>user\nHello!<|im_end|>") {
		t.Errorf("rendered prompt %q", e.Tokenizer().Decode(tok.Tokens, false))
	}
}

package tinyserve

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
	rendered := chatEqualsCompletion(t, Config{Model: "testdata/qwen3-tiny", Tokenizer: tokenizer.BuiltinQwen}, `,"chat_template_kwargs":{"enable_thinking":false}`)
	if !strings.Contains(rendered, "<|im_start|>user\nHello!<|im_end|>") {
		t.Errorf("rendered prompt %q", rendered)
	}
}

// TestChatTemplateFlagFile: qwen2-tiny's folder has no chat template;
// --chat-template naming a file (Qwen3's template, written out as a
// .jinja file) gives it one, and chat again continues as the completion
// of the rendered prompt.
func TestChatTemplateFlagFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qwen.jinja")
	if err := os.WriteFile(path, []byte(templateOf(t, "testdata/chat/qwen3/tokenizer_config.json")), 0o644); err != nil {
		t.Fatal(err)
	}
	rendered := chatEqualsCompletion(t, Config{Model: "testdata/qwen2-tiny", Tokenizer: tokenizer.BuiltinQwen, ChatTemplate: path}, `,"chat_template_kwargs":{"enable_thinking":false}`)
	if !strings.HasPrefix(rendered, "<|im_start|>system\nBe brief.<|im_end|>") {
		t.Errorf("rendered prompt %q", rendered)
	}
}

// TestChatLlamaTinyTokenizerFolder: llama-tiny with Llama 3.1's tokenizer
// folder (tokenizer.json and tokenizer_config.json, whose template writes
// <|begin_of_text|> itself): the rendered prompt has exactly one BOS, and
// chat continues as the completion of it.
func TestChatLlamaTinyTokenizerFolder(t *testing.T) {
	dir := t.TempDir()
	gz, err := os.ReadFile("testdata/tokenizers/llama3_1/tokenizer.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	cfgJSON, err := os.ReadFile("testdata/tokenizers/llama3_1/tokenizer_config.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tokenizer.json": raw, "tokenizer_config.json": cfgJSON} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rendered := chatEqualsCompletion(t, Config{Model: "testdata/llama-tiny", Tokenizer: dir}, "")
	if !strings.HasPrefix(rendered, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>") || strings.Count(rendered, "<|begin_of_text|>") != 1 {
		t.Errorf("rendered prompt %q: want one BOS, written by the template", rendered)
	}
}

// TestChatTemplateFlagString: --chat-template given the template itself
// (it holds braces), with \n escapes decoded as vLLM decodes them; a value
// that looks like a missing file, and a template that does not parse, stop
// Open with errors that say so.
func TestChatTemplateFlagString(t *testing.T) {
	tmpl := `{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}`
	rendered := chatEqualsCompletion(t, Config{Backend: BackendMock, ChatTemplate: tmpl}, "")
	if want := "[system] Be brief.\n[user] Hello!\n[assistant] "; rendered != want {
		t.Errorf("rendered %q, want %q", rendered, want)
	}
	for arg, want := range map[string]string{
		"no/such/template.jinja": "looks like a file path",
		"{% if %}":               "--chat-template",
	} {
		_, err := Open(context.Background(), Config{Backend: BackendMock, ChatTemplate: arg})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ChatTemplate %q: err %v, want it to say %q", arg, err, want)
		}
	}
}

// templateOf reads the chat_template string of a tokenizer_config.json.
func templateOf(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.ChatTemplate
}

// chatEqualsCompletion serves cfg and checks that a greedy chat completion
// of a two-message conversation continues exactly as /v1/completions does
// on the prompt /tokenize renders from the same messages (the ids, so no
// special tokens are added twice); it returns that prompt, decoded.
func chatEqualsCompletion(t *testing.T, cfg Config, extra string) string {
	t.Helper()
	e, err := Open(context.Background(), cfg)
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
	post("/tokenize", `{"messages":`+msgs+extra+`}`, &tok)
	var chat struct {
		Choices []struct{ Message struct{ Content string } }
	}
	post("/v1/chat/completions", `{"messages":`+msgs+`,"max_tokens":8,"temperature":0,"ignore_eos":true`+extra+`}`, &chat)
	ids, _ := json.Marshal(tok.Tokens)
	var cmpl struct {
		Choices []struct{ Text string }
	}
	post("/v1/completions", `{"prompt":`+string(ids)+`,"max_tokens":8,"temperature":0,"ignore_eos":true}`, &cmpl)
	if chat.Choices[0].Message.Content != cmpl.Choices[0].Text {
		t.Errorf("chat %q, completion of the rendered prompt %q", chat.Choices[0].Message.Content, cmpl.Choices[0].Text)
	}
	return e.Tokenizer().Decode(tok.Tokens, false)
}

package tinyserve

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/chat"
)

// chatTemplateSource reads Config.ChatTemplate as vLLM reads
// --chat-template: the contents of the file it names; else, when it holds
// a character only a template has ('{', '}' or a newline), the template
// itself, with its backslash escapes (\n, \t, \\, \", \') decoded as
// Python's unicode_escape decodes them, so that a one-line shell argument
// can hold newlines; else an error, since it looks like a path that could
// not be opened.
func chatTemplateSource(arg string) (src, from string, err error) {
	b, ferr := os.ReadFile(arg)
	if ferr == nil {
		return string(b), arg, nil
	}
	if !strings.ContainsAny(arg, "{}\n") {
		return "", "", fmt.Errorf("chat_template (--chat-template) %q looks like a file path, but it could not be opened: %w", arg, ferr)
	}
	r := strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\\`, `\`, `\"`, `"`, `\'`, `'`)
	return r.Replace(arg), "the --chat-template argument", nil
}

// givenChatTemplate parses the template Config.ChatTemplate gives and
// pairs it with the special tokens of the model's tokenizer folders (the
// first tokenizer_config.json that names any), which the template's
// bos_token and eos_token refer to. A template that does not parse is an
// error at start-up, as in vLLM, rather than a 400 on every request.
func givenChatTemplate(arg string, info llm.ModelInfo, lg *slog.Logger) (llm.ChatTemplate, map[string]any, error) {
	src, from, err := chatTemplateSource(arg)
	if err != nil {
		return nil, nil, err
	}
	t, err := chat.Parse(src)
	if err != nil {
		return nil, nil, fmt.Errorf("chat_template (--chat-template) from %s: %w", from, err)
	}
	var special chat.SpecialTokens
	for _, dir := range tokenizerDirs(info) {
		toks, err := chat.LoadSpecialTokens(dir)
		if err != nil {
			return nil, nil, err
		}
		if toks.BOS != "" || toks.EOS != "" {
			special = toks
			break
		}
	}
	lg.Info("chat template loaded", "from", from)
	return t, special.Vars(), nil
}

// tokenizerDirs are the folders a model's chat template and special
// tokens are looked for in: the tokenizer's own folders first, then the
// model's.
func tokenizerDirs(info llm.ModelInfo) []string {
	if info.Source == nil {
		return nil
	}
	var dirs []string
	for _, f := range info.Source.TokenizerFiles {
		dirs = append(dirs, filepath.Dir(f))
	}
	return append(dirs, info.Source.Dir)
}

package toolcall

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/tinyserve/tinyserve/llm/chat"
)

// parseCallJSON reads one call object: a "name" string and its arguments
// under the first of argKeys present (an object, or a string holding
// one). ok is false for anything else.
func parseCallJSON(s string, argKeys ...string) (Call, bool) {
	s = strings.TrimSpace(s)
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &obj); err != nil {
		return Call{}, false
	}
	var name string
	if err := json.Unmarshal(obj["name"], &name); err != nil || name == "" {
		return Call{}, false
	}
	args := json.RawMessage("{}")
	for _, k := range argKeys {
		if v, ok := obj[k]; ok {
			args = v
			break
		}
	}
	var str string
	if json.Unmarshal(args, &str) == nil {
		args = json.RawMessage(str) // arguments written as a JSON string
	}
	if t := bytes.TrimSpace(args); len(t) == 0 || t[0] != '{' {
		return Call{}, false
	}
	dumped, err := chat.Dumps(args)
	if err != nil {
		return Call{}, false
	}
	return Call{Name: name, Arguments: dumped}, true
}

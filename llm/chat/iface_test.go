package chat_test

import (
	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/chat"
)

// The server takes a *chat.Template as the engine's llm.ChatTemplate.
var _ llm.ChatTemplate = (*chat.Template)(nil)

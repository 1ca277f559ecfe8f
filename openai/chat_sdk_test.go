package openai

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/llm/chat/reasoning"
	"github.com/tinyserve/tinyserve/llm/chat/toolcall"
)

// TestChatOpenAIGo: the official Go SDK, unchanged, against the chat
// endpoint: a completion, a stream put together by its accumulator, a
// tool call it reads as one, and an error as its typed API error.
func TestChatOpenAIGo(t *testing.T) {
	hermes, _ := toolcall.New("hermes")
	qwen3, _ := reasoning.New("qwen3")
	f := newFake()
	f.info.MaxModelLen = 1024
	out := "Sure.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	f.script = scriptedText(out[:9], out[9:30], out[30:])
	_, srv := chatHandler(t, f, WithToolCallParser(hermes, true), WithReasoningParser(qwen3))
	client := sdk.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	msgs := []sdk.ChatCompletionMessageParamUnion{sdk.SystemMessage("Be brief."), sdk.UserMessage("Weather in Paris?")}

	c, err := client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Model: "fake", Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, out, c.Choices[0].Message.Content, "without tools the text is content")
	assert.Equal(t, "stop", c.Choices[0].FinishReason)
	assert.Positive(t, c.Usage.PromptTokens)

	tools := []sdk.ChatCompletionToolUnionParam{sdk.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})}
	c, err = client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Model: "fake", Messages: msgs, Tools: tools})
	require.NoError(t, err)
	require.Len(t, c.Choices[0].Message.ToolCalls, 1)
	call := c.Choices[0].Message.ToolCalls[0]
	assert.Equal(t, "get_weather", call.Function.Name)
	assert.Equal(t, `{"city": "Paris"}`, call.Function.Arguments)
	assert.Equal(t, "Sure.", c.Choices[0].Message.Content)
	assert.Equal(t, "tool_calls", c.Choices[0].FinishReason)

	stream := client.Chat.Completions.NewStreaming(ctx, sdk.ChatCompletionNewParams{Model: "fake", Messages: msgs, Tools: tools,
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}})
	acc := sdk.ChatCompletionAccumulator{}
	sawCall := false
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if tc, ok := acc.JustFinishedToolCall(); ok {
			sawCall = true
			assert.Equal(t, "get_weather", tc.Name)
			assert.Equal(t, `{"city": "Paris"}`, tc.Arguments)
		}
	}
	require.NoError(t, stream.Err())
	assert.True(t, sawCall || len(acc.Choices[0].Message.ToolCalls) == 1, "the accumulator saw the tool call")
	assert.Equal(t, "Sure.", acc.Choices[0].Message.Content)
	assert.Equal(t, "tool_calls", acc.Choices[0].FinishReason)
	assert.EqualValues(t, 3, acc.Usage.CompletionTokens)

	_, err = client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Model: "fake", Messages: []sdk.ChatCompletionMessageParamUnion{
		sdk.UserMessage([]sdk.ChatCompletionContentPartUnionParam{sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: "https://x/y.png"})})}})
	var apiErr *sdk.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	assert.True(t, strings.Contains(apiErr.RawJSON(), `content part type \"image_url\" is not supported`), apiErr.RawJSON())
}

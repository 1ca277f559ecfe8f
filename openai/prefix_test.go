package openai

import (
	"context"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// TestPrefixCachingUsage: with prefix caching, a repeated prompt reports
// the tokens the cache supplied in OpenAI's usage.prompt_tokens_details,
// streamed or not, and the first run has no such field; the output is the
// same.
func TestPrefixCachingUsage(t *testing.T) {
	ms := newMockServer(t, mock.Config{}, engine.Config{PrefixCaching: true}, WithServedModelNames("tiny"))
	client := sdk.NewClient(option.WithBaseURL(ms.srv.URL+"/v1/"), option.WithAPIKey("unused"),
		option.WithHTTPClient(ms.client), option.WithMaxRetries(0))
	ctx := context.Background()
	prompt := strings.Repeat("abcdefghij", 4) // 40 byte tokens: two whole blocks of 16
	params := sdk.CompletionNewParams{
		Model: "tiny", Prompt: sdk.CompletionNewParamsPromptUnion{OfString: sdk.String(prompt)},
		MaxTokens: sdk.Int(5), Temperature: sdk.Float(0),
	}

	first, err := client.Completions.New(ctx, params)
	require.NoError(t, err)
	assert.Equal(t, ms.expected(prompt, 5), first.Choices[0].Text)
	assert.False(t, first.Usage.JSON.PromptTokensDetails.Valid(), "first run: %s", first.Usage.RawJSON())

	again, err := client.Completions.New(ctx, params)
	require.NoError(t, err)
	assert.Equal(t, first.Choices[0].Text, again.Choices[0].Text)
	assert.Equal(t, int64(40), again.Usage.PromptTokens)
	assert.Equal(t, int64(32), again.Usage.PromptTokensDetails.CachedTokens)

	params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
	stream := client.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	var cached int64 = -1
	for stream.Next() {
		chunk := stream.Current()
		for _, c := range chunk.Choices {
			text.WriteString(c.Text)
		}
		if chunk.JSON.Usage.Valid() {
			cached = chunk.Usage.PromptTokensDetails.CachedTokens
		}
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, first.Choices[0].Text, text.String())
	assert.Equal(t, int64(32), cached)
}

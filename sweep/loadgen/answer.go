package loadgen

import "encoding/json"

// answer is what the client reads from a non-streamed 200 body, whatever
// its API.
type answer struct {
	usage   *Usage
	choices int     // the length of choices
	text    string  // choices[0].text, or its message's reasoning and content
	finish  *string // choices[0].finish_reason
	err     json.RawMessage
}

// decodeAnswer decodes a non-streamed body of api; the error is
// encoding/json's.
func decodeAnswer(raw []byte, api API) (answer, error) {
	if api == APIChat {
		return decodeChatAnswer(raw)
	}
	var parsed struct {
		Usage   *Usage `json:"usage"`
		Choices []struct {
			Text         string  `json:"text"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &parsed); err != nil {
		return answer{}, err
	}
	a := answer{usage: parsed.Usage, choices: len(parsed.Choices), err: parsed.Error}
	if len(parsed.Choices) > 0 {
		a.text, a.finish = parsed.Choices[0].Text, parsed.Choices[0].FinishReason
	}
	return a, nil
}

// decodeChatAnswer decodes a chat completion: choices[0].message holds the
// content, and a reasoning model's reasoning_content (or reasoning), which
// counts as text as it does when streamed.
func decodeChatAnswer(raw []byte) (answer, error) {
	var parsed struct {
		Usage   *Usage `json:"usage"`
		Choices []struct {
			Message      chatDelta `json:"message"`
			FinishReason *string   `json:"finish_reason"`
		} `json:"choices"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &parsed); err != nil {
		return answer{}, err
	}
	a := answer{usage: parsed.Usage, choices: len(parsed.Choices), err: parsed.Error}
	if len(parsed.Choices) > 0 {
		m := &parsed.Choices[0].Message
		a.text, a.finish = m.reasoning()+m.Content, parsed.Choices[0].FinishReason
	}
	return a, nil
}

-- wrk script: the same POST the sweep client sends (a streamed completion
-- with usage), so that both clients do the same HTTP work.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"bench","prompt":"The quick brown fox jumps over the lazy dog","max_tokens":4,"temperature":0,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true}'

package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
)

// WriteJSON answers v as a JSON body with the given status. Encoding errors are dropped: the
// status line has been sent, and every type of this package encodes.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// IsNull reports whether a raw field was absent or JSON null: both mean "the default" on the
// servers' wire (SGLang normalizes a null sampling field in __post_init__, vLLM's pydantic
// models treat it as unset).
func IsNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// IsString reports whether a raw field holds a JSON string (a text prompt, where token mode
// wants a list of ids).
func IsString(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '"'
}

// IDs encodes token ids as the raw value of a prompt field (input_ids, prompt).
func IDs(ids []int32) json.RawMessage {
	if ids == nil {
		ids = []int32{}
	}
	b, _ := json.Marshal(ids) // a slice of ints always encodes
	return b
}

// TokenIDs reads a single prompt of token ids from field (input_ids, prompt). SGLang and vLLM
// take a list of lists as a batch; tau2rl's servers answer one prompt per request, so a batch
// is refused with a message saying so, as is an empty list (SGLang: "input_ids cannot be
// empty.") and an id outside int32 (no vocabulary is that large). Whether each id is in the
// served vocabulary is the server's check.
func TokenIDs(field string, raw json.RawMessage) ([]int32, error) {
	if IsNull(raw) {
		return nil, fmt.Errorf("%s is required (a list of token ids)", field)
	}
	var ids []int64
	if err := json.Unmarshal(raw, &ids); err != nil {
		var batch [][]json.RawMessage
		if json.Unmarshal(raw, &batch) == nil {
			return nil, fmt.Errorf("%s: batch requests (a list of lists) are not supported; send one prompt per request", field)
		}
		return nil, fmt.Errorf("%s must be a list of integer token ids: %v", field, err)
	}
	if len(ids) == 0 {
		//lint:ignore ST1005 SGLang's own text, which clients may match on
		return nil, fmt.Errorf("%s cannot be empty.", field)
	}
	out := make([]int32, len(ids))
	for i, v := range ids {
		if v < math.MinInt32 || v > math.MaxInt32 {
			return nil, fmt.Errorf("%s[%d] = %d is outside the vocabulary", field, i, v)
		}
		out[i] = int32(v)
	}
	return out, nil
}

// StopIDs checks stop_token_ids: each a token id (≥ 0, within int32).
func StopIDs(ids []int64) ([]int32, error) {
	out := make([]int32, len(ids))
	for i, v := range ids {
		if v < 0 || v > math.MaxInt32 {
			return nil, fmt.Errorf("stop_token_ids[%d] = %d is not a token id", i, v)
		}
		out[i] = int32(v)
	}
	return out, nil
}

// StopStrings reads a stop field: absent or null (none), a string, or a list of strings. Empty
// strings are kept; what a server does with them is its own rule.
func StopStrings(raw json.RawMessage) ([]string, error) {
	if IsNull(raw) {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("stop must be a string or a list of strings")
	}
	return many, nil
}

// ClampLogprob is the one rule for log-probs a server of the project encodes: vLLM clamps them
// at −9999.0 (token_logprobs, top_logprobs, chat logprobs), and JSON cannot carry −Inf or NaN
// at all, so values below −9999, −Inf and NaN become −9999; +Inf (not a log-probability) becomes
// 0. Clients take what a server sends.
func ClampLogprob(x float64) float64 {
	switch {
	case math.IsNaN(x) || x < -9999:
		return -9999
	case x > 0 && math.IsInf(x, 1):
		return 0
	}
	return x
}

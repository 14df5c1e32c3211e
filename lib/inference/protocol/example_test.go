package protocol_test

import (
	"encoding/json"
	"fmt"

	"tau2rl/lib/inference/protocol"
)

// A client reads SGLang's /generate answer: the matched stop token and one log-prob per output
// token, in output_ids order.
func Example_decodeGenerate() {
	body := `{"output_ids": [151657, 151645], "meta_info": {"id": "ep1", "finish_reason": {"type": "stop", "matched": 151645},
		"weight_version": "3", "output_token_logprobs": [[-0.25, 151657, null], [-0.5, 151645, null]]}}`
	var r protocol.GenerateResponse
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		panic(err)
	}
	id, _ := r.MetaInfo.FinishReason.MatchedToken()
	fmt.Println(r.MetaInfo.FinishReason.Type, id, r.MetaInfo.WeightVersion)
	for _, t := range r.MetaInfo.OutputTokenLogprobs {
		fmt.Println(t.TokenID, *t.Logprob)
	}
	// Output:
	// stop 151645 3
	// 151657 -0.25
	// 151645 -0.5
}

// A server builds vLLM's logprobs for the tokens it reports: text_offset counts code points,
// log-probs are clamped at −9999.
func ExampleNewCompletionLogprobs() {
	lp := protocol.NewCompletionLogprobs([]string{"Ça", " va", "?"}, []float64{-0.1, -20000, -0.3})
	b, _ := json.Marshal(lp)
	fmt.Println(string(b))
	// Output:
	// {"text_offset":[0,2,5],"token_logprobs":[-0.1,-9999,-0.3],"tokens":["Ça"," va","?"],"top_logprobs":[{"Ça":-0.1},{" va":-9999},{"?":-0.3}]}
}

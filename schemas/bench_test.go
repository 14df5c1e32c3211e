package schemas

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// benchGroup is one GRPO group of realistic SYNTHETIC trajectories (30 policy calls, 8k-token
// final context, tool calls), the typical unit a producer publishes.
func benchGroup(n int) []*Trajectory {
	rng := rand.New(rand.NewPCG(11, 12))
	out := make([]*Trajectory, n)
	for i := range out {
		out[i] = Synthetic(rng, DefaultSyntheticOptions())
	}
	return out
}

// arealSample is one line of the JSON-lines baseline: AReaL's per-LLM-call training sample
// (InteractionWithTokenLogpReward.to_tensor_dict: input_ids = prompt ‖ completion, loss_mask,
// logprobs and versions over the whole sequence, scalar reward), plus ids.
type arealSample struct {
	Kind      string    `json:"kind"`
	TaskID    string    `json:"task_id"`
	TrajID    string    `json:"traj_id"`
	SampleIdx int       `json:"sample_idx"`
	InputIDs  []int32   `json:"input_ids"`
	LossMask  []int     `json:"loss_mask"`
	Logprobs  []float32 `json:"logprobs"`
	Versions  []int64   `json:"versions"`
	Reward    float64   `json:"reward"`
}

// encodeJSONL writes the group as JSON lines: one line per trajectory (messages and grading),
// then one AReaL-style line per LLM call with its full token sequence.
func encodeJSONL(trajs []*Trajectory) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, t := range trajs {
		meta := *t
		meta.Calls = nil
		if err := enc.Encode(&meta); err != nil {
			return nil, err
		}
		prompts, err := t.FullPrompts()
		if err != nil {
			return nil, err
		}
		for i := range t.Calls {
			c := &t.Calls[i]
			p := prompts[i]
			s := arealSample{Kind: "sample", TaskID: t.TaskID, TrajID: t.ID, SampleIdx: i, Reward: c.ShapedReward,
				InputIDs: append(append([]int32(nil), p...), c.CompletionTokens...)}
			s.LossMask = make([]int, len(s.InputIDs))
			s.Logprobs = make([]float32, len(s.InputIDs))
			s.Versions = make([]int64, len(s.InputIDs))
			for k := range p {
				s.Versions[k] = -1
			}
			copy(s.Logprobs[len(p):], c.BehaviorLogprobs)
			copy(s.Versions[len(p):], c.Versions())
			for k := len(p); k < len(s.InputIDs); k++ {
				s.LossMask[k] = 1
			}
			if err := enc.Encode(&s); err != nil {
				return nil, err
			}
		}
	}
	return buf.Bytes(), nil
}

func decodeJSONL(data []byte) (int, error) {
	n := 0
	for _, line := range bytes.Split(data, []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		if bytes.HasPrefix(line, []byte(`{"kind":"sample"`)) {
			var s arealSample
			if err := json.Unmarshal(line, &s); err != nil {
				return n, err
			}
		} else {
			var t Trajectory
			if err := json.Unmarshal(line, &t); err != nil {
				return n, err
			}
		}
		n++
	}
	return n, nil
}

// BenchmarkCodecVsJSONL encodes+decodes the same group with the Arrow codec and as AReaL-style
// JSON lines in the same iteration, and reports the speed and size ratios. It also measures the
// same prefix-shared Trajectory structure as plain JSON, separating the codec's gain from the
// layout's.
func BenchmarkCodecVsJSONL(b *testing.B) {
	group := benchGroup(8)
	tokens := 0
	for _, t := range group {
		tokens += t.GeneratedTokens()
	}
	var arrowNS, jsonNS, sameNS time.Duration
	var arrowBytes, jsonBytes, sameBytes int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		data, err := EncodeBatch(group)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := DecodeBatch(data); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		js, err := encodeJSONL(group)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := decodeJSONL(js); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		// The same prefix-shared structure as plain JSON (codec cost without the layout gain).
		same, err := json.Marshal(group)
		if err != nil {
			b.Fatal(err)
		}
		var back []*Trajectory
		if err := json.Unmarshal(same, &back); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		arrowNS += t1.Sub(t0)
		jsonNS += t2.Sub(t1)
		sameNS += t3.Sub(t2)
		arrowBytes, jsonBytes, sameBytes = len(data), len(js), len(same)
	}
	b.ReportMetric(float64(arrowNS.Nanoseconds())/float64(b.N)/1e6, "arrow_ms/op")
	b.ReportMetric(float64(jsonNS.Nanoseconds())/float64(b.N)/1e6, "jsonl_ms/op")
	b.ReportMetric(float64(jsonNS)/float64(arrowNS), "speedup_x")
	b.ReportMetric(float64(arrowBytes), "arrow_bytes")
	b.ReportMetric(float64(jsonBytes), "jsonl_bytes")
	b.ReportMetric(float64(jsonBytes)/float64(arrowBytes), "size_ratio_x")
	b.ReportMetric(float64(tokens), "gen_tokens")
	b.ReportMetric(float64(sameNS)/float64(arrowNS), "speedup_vs_same_json_x")
	b.ReportMetric(float64(sameBytes)/float64(arrowBytes), "size_vs_same_json_x")
}

// BenchmarkArrowEncode and BenchmarkArrowDecode time the codec alone on one group of 8.
func BenchmarkArrowEncode(b *testing.B) {
	group := benchGroup(8)
	data, _ := EncodeBatch(group)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := EncodeBatch(group); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkArrowDecode(b *testing.B) {
	data, _ := EncodeBatch(benchGroup(8))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeBatch(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBytesPerToken reports storage cost per generated (completion) token: Arrow IPC as
// published, the same zstd-compressed as Kafka would, and Parquet (zstd) as archived. The timed
// part is the Parquet write.
func BenchmarkBytesPerToken(b *testing.B) {
	group := benchGroup(32)
	tokens, stored := 0, 0
	for _, t := range group {
		tokens += t.GeneratedTokens()
		for i := range t.Calls {
			stored += len(t.Calls[i].PromptTokens) + len(t.Calls[i].CompletionTokens)
		}
	}
	data, err := EncodeBatch(group)
	if err != nil {
		b.Fatal(err)
	}
	zw, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	compressed := zw.EncodeAll(data, nil)
	var pq bytes.Buffer
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pq.Reset()
		w, err := NewParquetWriter(&pq, DefaultParquetWriterOptions())
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Write(group); err != nil {
			b.Fatal(err)
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(data))/float64(tokens), "arrow_B/gen_token")
	b.ReportMetric(float64(len(compressed))/float64(tokens), "arrow_zstd_B/gen_token")
	b.ReportMetric(float64(pq.Len())/float64(tokens), "parquet_B/gen_token")
	b.ReportMetric(float64(stored)/float64(tokens), "stored_tokens/gen_token")
}

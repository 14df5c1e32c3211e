package schemas_test

import (
	"fmt"
	"time"

	"tau2rl/schemas"
)

// episode is a graded two-call episode of retail task 7: the second call's prompt is the first
// call's prompt and completion plus the tool result, as an agent's conversation grows.
func episode() *schemas.Trajectory {
	t := &schemas.Trajectory{
		ID: "0b9f4c1e-5d7a-4c2e-9a51-3f0d2b7e8c11", TaskID: "7", Domain: "retail", Split: "test",
		Status: schemas.StatusOK, Termination: schemas.TerminationAgentStop, Reward: 1,
		StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), EndedAt: time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC),
		PolicyVersionStart: 4,
	}
	// Call 0: prompt of 4 tokens, 3 sampled under policy version 4 with their log-probs.
	if _, err := t.AppendCall(schemas.CallInput{
		Prompt: []int32{101, 102, 103, 104}, Completion: []int32{201, 202, 203},
		BehaviorLogprobs: []float32{-0.1, -0.2, -0.3}, Version: 4,
	}); err != nil {
		panic(err)
	}
	// Call 1: everything so far plus a tool result (301, 302), then 2 tokens under version 5.
	if _, err := t.AppendCall(schemas.CallInput{
		Prompt:     []int32{101, 102, 103, 104, 201, 202, 203, 301, 302},
		Completion: []int32{204, 205}, BehaviorLogprobs: []float32{-0.4, -0.5}, Version: 5,
	}); err != nil {
		panic(err)
	}
	return t
}

// AppendCall stores a prompt as a reference to the longest earlier sequence it extends, so a
// conversation of n calls is not stored n times; FullPrompt rebuilds it.
func ExampleTrajectory_AppendCall() {
	t := episode()
	c := t.Calls[1]
	fmt.Printf("call 1 shares %d tokens of call %d and stores %v\n", c.PromptShared, c.PromptRef, c.PromptTokens)
	full, err := t.FullPrompt(1)
	if err != nil {
		panic(err)
	}
	fmt.Println("full prompt:", full)
	fmt.Println("policy versions:", t.MinVersion(), "to", t.MaxVersion())
	fmt.Println("valid:", t.Validate() == nil)
	// Output:
	// call 1 shares 7 tokens of call 0 and stores [301 302]
	// full prompt: [101 102 103 104 201 202 203 301 302]
	// policy versions: 4 to 5
	// valid: true
}

// A producer frames one task's trajectories into one message (key: the task id, value: an Arrow
// IPC stream, headers: content and schema version); a consumer unframes it, which checks the
// headers and validates every trajectory.
func ExampleFrameTrajectories() {
	f, err := schemas.FrameTrajectories(episode())
	if err != nil {
		panic(err)
	}
	fmt.Println("key:", f.Key)
	fmt.Println("content-type:", f.Headers[schemas.HeaderContentType])
	fmt.Println("this build's schema version:", f.Headers[schemas.HeaderSchemaVersion] == schemas.SchemaVersion)

	trajs, err := schemas.UnframeTrajectories(f.Value, f.Headers)
	if err != nil {
		panic(err)
	}
	fmt.Println("decoded:", len(trajs), trajs[0].TaskID, trajs[0].Reward, len(trajs[0].Calls), "calls")

	// A message from a newer major schema is refused, not misread.
	f.Headers[schemas.HeaderSchemaVersion] = "2.0"
	_, err = schemas.UnframeTrajectories(f.Value, f.Headers)
	fmt.Println("schema 2.0 refused:", err != nil)
	// Output:
	// key: 7
	// content-type: application/vnd.apache.arrow.stream
	// this build's schema version: true
	// decoded: 1 7 1 2 calls
	// schema 2.0 refused: true
}

// The one staleness rule: with max_head_offpolicyness 2, work of policy version 4 is usable up to
// version 6.
func ExampleTooStale() {
	const maxOff = 2
	for _, latest := range []int64{5, 6, 7} {
		fmt.Printf("version 4 at trainer version %d: too stale %v\n", latest, schemas.TooStale(4, latest, maxOff))
	}
	fmt.Println("stale after version", schemas.StaleAfter(4, maxOff))
	// Output:
	// version 4 at trainer version 5: too stale false
	// version 4 at trainer version 6: too stale false
	// version 4 at trainer version 7: too stale true
	// stale after version 6
}

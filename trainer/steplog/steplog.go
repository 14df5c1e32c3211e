// Package steplog appends one JSON object per training step to a file beside the checkpoints
// (steps.jsonl), so a run's curves (loss, reward, the train/inference log-prob mismatch, tokens)
// survive the process and checkpoint pruning: Prometheus gauges only hold the last step and
// trainer_state.json only the kept checkpoints. tau2-eval plot reads it.
package steplog

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// FileName is the log's name inside the checkpoint directory.
const FileName = "steps.jsonl"

// Record is one step. Metrics hold the step's numbers by name (loss, reward, behav_abs_diff,
// behav_cap_fraction, loss_tokens, …); the names are the trainer's and are documented where it
// writes them.
type Record struct {
	// Kind is "grpo" or "sft".
	Kind    string             `json:"kind"`
	Step    int64              `json:"step"`
	Version int64              `json:"version"`
	Time    time.Time          `json:"time"`
	Metrics map[string]float64 `json:"metrics"`
}

// Append writes r as one line of dir/steps.jsonl (creating dir and the file), and syncs it: a
// step's record is durable before the step's checkpoint is announced.
func Append(dir string, r Record) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("steplog: %w", err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("steplog: step %d: %w", r.Step, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, FileName), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("steplog: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("steplog: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("steplog: %w", err)
	}
	return f.Close()
}

// Read returns the records of path (a steps.jsonl file, or a directory holding one). A torn last
// line (the process died mid-write) is ignored; a malformed line elsewhere is an error naming it.
func Read(path string) ([]Record, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, FileName)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("steplog: %w", err)
	}
	defer f.Close()
	return parse(f, path)
}

func parse(r io.Reader, name string) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	var pending error
	line := 0
	for sc.Scan() {
		line++
		if pending != nil {
			return nil, pending // a bad line that was not the last one
		}
		if len(sc.Bytes()) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			pending = fmt.Errorf("steplog: %s line %d: %w", name, line, err)
			continue
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("steplog: %s: %w", name, errors.Join(err, pending))
	}
	return out, nil
}

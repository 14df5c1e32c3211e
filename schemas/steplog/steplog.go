// Package steplog appends one JSON object per training step to a file beside the checkpoints
// (steps.jsonl), so a run's curves (loss, reward, the train/inference log-prob mismatch, tokens)
// survive the process and checkpoint pruning: Prometheus gauges only hold the last step and
// trainer_state.json only the kept checkpoints. tau2-eval plot reads it.
package steplog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"tau2rl/lib/durable"
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
//
// Each step appears once. A trainer that crashed after logging steps it had not checkpointed
// resumes from its checkpoint and logs those steps again; so when r's step is at or below the
// last step of r's kind in the file, the records of that kind from r's step on are dropped (they
// belong to the run that was rolled back; readers used to keep the last of duplicates, which is
// the same choice) and the file is rewritten atomically before r is added. Records of other kinds
// are kept. A torn last line (the process died mid-write) is dropped first, so the new record is
// never glued onto it. The common case reads only the file's tail. One writer per file.
func Append(dir string, r Record) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("steplog: %w", err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("steplog: step %d: %w", r.Step, err)
	}
	line := append(b, '\n')
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("steplog: %w", err)
	}
	end, ok, err := appendAt(f, r)
	if err == nil && !ok {
		f.Close()
		return rewrite(path, r, line)
	}
	if err == nil {
		err = f.Truncate(end) // drops a torn tail; a no-op otherwise
	}
	if err == nil {
		_, err = f.WriteAt(line, end)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("steplog: %s: %w", path, err)
	}
	return nil
}

// tailBytes is how much of the file's end appendAt reads: many records' worth.
const tailBytes = 64 << 10

// appendAt looks at the end of f: ok means r can simply be written at offset end (after the last
// complete line, whose record is of r's kind and an earlier step, or an empty file); otherwise
// the file needs rewrite.
func appendAt(f *os.File, r Record) (end int64, ok bool, err error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, false, err
	}
	size := fi.Size()
	if size == 0 {
		return 0, true, nil
	}
	off := max(0, size-tailBytes)
	buf := make([]byte, size-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return 0, false, err
	}
	cut := bytes.LastIndexByte(buf, '\n') + 1 // end of the last complete line, within buf
	if cut == 0 {
		return 0, false, nil // only a torn line, or a line longer than the tail: rewrite judges
	}
	if cut < len(buf) {
		return 0, false, nil // a torn tail: rewrite drops it
	}
	start := bytes.LastIndexByte(buf[:cut-1], '\n') + 1
	if start == 0 && off > 0 {
		return 0, false, nil // the last line began before the tail
	}
	var last head
	if json.Unmarshal(buf[start:cut-1], &last) != nil || last.Kind != r.Kind || last.Step >= r.Step {
		return 0, false, nil
	}
	return size, true, nil
}

// head is the part of a record Append orders by.
type head struct {
	Kind string `json:"kind"`
	Step int64  `json:"step"`
}

// rewrite replaces path atomically with its complete lines minus the records of r's kind at or
// after r's step, followed by line (r's). Lines that do not parse are kept as they were (Read
// reports them).
func rewrite(path string, r Record, line []byte) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("steplog: %w", err)
	}
	if i := bytes.LastIndexByte(old, '\n'); i+1 < len(old) {
		old = old[:i+1] // the torn tail
	}
	out := make([]byte, 0, len(old)+len(line))
	for len(old) > 0 {
		i := bytes.IndexByte(old, '\n')
		l := old[:i+1]
		old = old[i+1:]
		var h head
		if json.Unmarshal(l, &h) == nil && h.Kind == r.Kind && h.Step >= r.Step {
			continue
		}
		out = append(out, l...)
	}
	out = append(out, line...)
	if err := durable.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("steplog: %w", err)
	}
	return nil
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

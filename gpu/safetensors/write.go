package safetensors

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"tau2rl/lib/durable"
)

// Source yields the float32 values of one tensor when the writer needs them, so a checkpoint can
// be written one tensor at a time (from device memory, say) without a second full copy on the host.
// The writer is done with one tensor's values before it asks for the next, so a Source may return
// the same buffer every time (gpu/cuda downloads every tensor into one).
type Source func(name string) ([]float32, error)

// WriteDir writes tensors (in the given order) into dir as Hugging Face does: one
// model.safetensors when the total is at most maxShardBytes (or maxShardBytes ≤ 0), else
// model-0000k-of-0000n.safetensors shards plus model.safetensors.index.json. Each file is written
// through lib/durable (a synced temporary file renamed into place), so a reader never sees a
// half-written file; the directory is synced again after stale files are removed. It returns the names of the files written.
func WriteDir(dir string, specs []TensorSpec, metadata map[string]string, maxShardBytes int64, src Source) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var shards [][]TensorSpec
	var cur []TensorSpec
	var curBytes, total int64
	for _, s := range specs {
		b := s.Bytes()
		total += b
		if maxShardBytes > 0 && len(cur) > 0 && curBytes+b > maxShardBytes {
			shards = append(shards, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, s)
		curBytes += b
	}
	shards = append(shards, cur)
	var written []string
	if len(shards) == 1 {
		if err := writeFile(filepath.Join(dir, SingleFile), shards[0], metadata, src); err != nil {
			return nil, err
		}
		// A stale index from an earlier sharded save would shadow the new single file.
		if err := os.Remove(filepath.Join(dir, IndexFile)); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("safetensors: remove stale index: %w", err)
		}
		return []string{SingleFile}, syncDir(dir)
	}
	idx := Index{Metadata: map[string]any{"total_size": total}, WeightMap: map[string]string{}}
	for k, sh := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", k+1, len(shards))
		if err := writeFile(filepath.Join(dir, name), sh, metadata, src); err != nil {
			return nil, err
		}
		for _, s := range sh {
			idx.WeightMap[s.Name] = name
		}
		written = append(written, name)
	}
	ib, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("safetensors: index: %w", err)
	}
	if err := durable.WriteFile(filepath.Join(dir, IndexFile), ib, 0o644); err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if err := os.Remove(filepath.Join(dir, SingleFile)); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("safetensors: remove stale single file: %w", err)
	}
	return append(written, IndexFile), syncDir(dir)
}

func writeFile(path string, specs []TensorSpec, metadata map[string]string, src Source) error {
	var fillErr error // already says "safetensors: "
	err := durable.Write(path, 0o644, func(bw io.Writer) error {
		fillErr = writeTensors(bw, specs, metadata, src)
		return fillErr
	})
	if err != nil && err != fillErr {
		return fmt.Errorf("safetensors: %w", err)
	}
	return err
}

func writeTensors(bw io.Writer, specs []TensorSpec, metadata map[string]string, src Source) error {
	w, err := NewWriter(bw, specs, metadata)
	if err != nil {
		return err
	}
	for _, s := range specs {
		vals, err := src(s.Name)
		if err != nil {
			return fmt.Errorf("safetensors: source of %q: %w", s.Name, err)
		}
		if int64(len(vals))*int64(s.DType.Size()) != s.Bytes() {
			return fmt.Errorf("safetensors: source of %q gave %d values for shape %v", s.Name, len(vals), s.Shape)
		}
		if err := w.WriteFloat32(s.Name, vals); err != nil {
			return err
		}
	}
	return w.Close()
}

func syncDir(dir string) error {
	if err := durable.SyncDir(dir); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"tau2rl/lib/uuid"
	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
)

// TestReport computes pass^k per domain and version from a dataset.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	var trajs []*schemas.Trajectory
	mk := func(domain, task string, version int64, reward float64, status schemas.Status) {
		tr := &schemas.Trajectory{ID: uuid.New(), TaskID: task, Domain: domain, Split: "test", Status: status,
			PolicyVersionStart: version, Reward: reward, Termination: schemas.TerminationUserStop,
			StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), EndedAt: time.Date(2026, 1, 2, 3, 5, 5, 0, time.UTC)}
		if status != schemas.StatusOK {
			tr.Error, tr.Termination = "llm down", schemas.TerminationInfrastructureError
		}
		trajs = append(trajs, tr)
	}
	// airline v1: task a 2/2, task b 1/2 → pass^1 = (1 + .5)/2, pass^2 = (1 + 0)/2.
	mk("airline", "a", 1, 1, schemas.StatusOK)
	mk("airline", "a", 1, 1, schemas.StatusOK)
	mk("airline", "b", 1, 1, schemas.StatusOK)
	mk("airline", "b", 1, 0, schemas.StatusOK)
	mk("airline", "b", 1, 0, schemas.StatusInfraError)
	mk("airline", "a", 2, 0, schemas.StatusOK)
	mk("retail", "c", 1, 1, schemas.StatusOK)
	if _, err := dataset.WritePartitioned(dir, "part-0", trajs, schemas.ParquetWriterOptions{}); err != nil {
		t.Fatal(err)
	}
	// The first four episodes archived again (a producer retry after an archiver restart): the
	// report counts each id once (issue 13 item 5).
	if _, err := dataset.WritePartitioned(dir, "part-1", trajs[:4], schemas.ParquetWriterOptions{}); err != nil {
		t.Fatal(err)
	}
	// A retail episode that needed the NL judge: real termination, no reward, not an infra error.
	ne := &schemas.Trajectory{ID: uuid.New(), TaskID: "d", Domain: "retail", Split: "test", Status: schemas.StatusNotEvaluated,
		Error: "NL_ASSERTION not evaluated", PolicyVersionStart: 1, Termination: schemas.TerminationUserStop,
		StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), EndedAt: time.Date(2026, 1, 2, 3, 5, 5, 0, time.UTC)}
	if _, err := dataset.WritePartitioned(dir, "part-2", []*schemas.Trajectory{ne}, schemas.ParquetWriterOptions{}); err != nil {
		t.Fatal(err)
	}
	ds, err := dataset.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := reportConfig{Dataset: dir, MaxK: 4, ByVersion: true, Format: "text"}
	rows, err := reportRows(context.Background(), ds, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows: %+v", len(rows), rows)
	}
	r := rows[0]
	if r.Domain != "airline" || *r.PolicyVersion != 1 || r.Tasks != 2 || r.Episodes != 5 || r.InfraErrors != 1 {
		t.Fatalf("row %+v", r)
	}
	if len(r.PassHatK) != 2 || r.PassHatK[0] != 0.75 || r.PassHatK[1] != 0.5 {
		t.Errorf("pass^k %v, want [0.75 0.5]", r.PassHatK)
	}
	if r := rows[2]; r.Domain != "retail" || r.Episodes != 2 || r.InfraErrors != 0 || r.NotEvaluated != 1 || r.Tasks != 1 || r.AvgReward != 1 {
		t.Errorf("retail row %+v: want 2 episodes, 1 not evaluated, no infra errors, task c only", r)
	}
	var out bytes.Buffer
	if err := runReport(context.Background(), &cfg, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"airline v1", "airline v2", "retail v1", "pass^2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	cfg.ByVersion, cfg.Format = false, "json"
	out.Reset()
	if err := runReport(context.Background(), &cfg, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"domain": "airline"`) || strings.Contains(out.String(), "policy_version") {
		t.Errorf("json report:\n%s", out.String())
	}
}

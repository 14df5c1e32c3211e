package localrun

import (
	"fmt"
	"sort"
	"strings"

	"tau2rl/schemas/report"
)

// accountingLine is the accounting on one line: trained and every reason, largest first.
func accountingLine(a report.Accounting) string {
	parts := []string{fmt.Sprintf("trained %d (%.1f%%)", a.Trained, 100*a.TrainedShare)}
	for _, r := range a.Reasons() {
		parts = append(parts, fmt.Sprintf("%s %d", r, a.Discarded[r]))
	}
	if a.DuplicateCopies > 0 {
		parts = append(parts, fmt.Sprintf("(and %d duplicate copies ignored)", a.DuplicateCopies))
	}
	return strings.Join(parts, ", ")
}

// writeAccounting is report.md's "Where the produced episodes went" table.
func writeAccounting(s *strings.Builder, a report.Accounting) {
	if a.Produced == 0 {
		return
	}
	fmt.Fprintf(s, "\nWhere the %d produced episodes of GRPO went (trainer's step log against the archive):\n\n", a.Produced)
	fmt.Fprintf(s, "| episodes | count | share |\n|---|---|---|\n")
	row := func(name string, n int) {
		fmt.Fprintf(s, "| %s | %d | %.1f%% |\n", name, n, 100*float64(n)/float64(a.Produced))
	}
	row("trained on", a.Trained)
	for _, r := range a.Reasons() {
		row("discarded: "+strings.ReplaceAll(r, "_", " "), a.Discarded[r])
	}
	if a.DuplicateCopies > 0 {
		fmt.Fprintf(s, "\n%d duplicate copies (redelivered episodes) were ignored; they are not produced episodes.\n", a.DuplicateCopies)
	}
	if n := a.Discarded[report.Unaccounted]; n != 0 {
		fmt.Fprintf(s, "\n**%d episodes unaccounted**: the step log and the archive disagree (a restarted trainer, or an archiver that missed episodes).\n", n)
	}
}

// failureCell prints a cell's failure kinds: "db 3, malformed 1".
func failureCell(f map[string]int) string {
	kinds := make([]string, 0, len(f))
	for k := range f {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, f[k])
	}
	if len(parts) == 0 {
		return "–"
	}
	return strings.Join(parts, ", ")
}

// writeDiagnosis is report.md's per task table (every version) and the total.
func writeDiagnosis(s *strings.Builder, d report.Diagnosis) {
	if d.Total.Episodes == 0 {
		return
	}
	fmt.Fprintf(s, "\nPer task over the GRPO stage (groups = rollout requests; equal = every reward the same, no GRPO signal, dropped by the trainer by default; advantage = reward − group mean; failures from τ²'s reward breakdown; the figure tasks_versions shows success per task and policy version):\n\n")
	fmt.Fprintf(s, "| task | episodes | success | groups | equal-reward groups | mean \\|adv\\| | adv std | gen tokens | failures |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range append(append([]report.Cell(nil), d.Tasks...), d.Total) {
		fmt.Fprintf(s, "| %s | %d | %.3f | %d | %d | %.3f | %.3f | %.0f | %s |\n", c.Task, c.Episodes, c.Success, c.Groups, c.EqualGroups,
			c.AdvAbsMean, c.AdvStd, c.GenTokens, failureCell(c.Failures))
	}
}

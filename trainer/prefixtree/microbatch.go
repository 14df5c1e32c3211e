package prefixtree

import (
	"fmt"

	"tau2rl/gpu"
)

// MicroBatch is one packed prefix-tree micro-batch: the gpu.MicroBatch the backend runs (embedded,
// so &mb.MicroBatch goes to Backend.LogProbs/Forward unchanged) plus the references the loss needs.
//
// Nodes are in depth-first pre-order: every ancestor precedes its descendants and the subtree of
// node j is the index range [j, SubtreeEnd[j]]. Attention mask rule, with no N×N matrix: key j is
// visible to query i ⇔ j ≤ i ≤ SubtreeEnd[j]. The log-prob of node c's token comes from the model
// output at Parent[c]; roots (sequence starts) are not scored.
type MicroBatch struct {
	// MicroBatch holds Tokens, Positions (depth in the original sequence(s), 0-based), Parent (−1
	// for a root) and SubtreeEnd (last node of the subtree, itself for a leaf).
	gpu.MicroBatch

	// RefStart, RefSeq, RefTok list, in CSR form, the loss tokens each node stands for: node c is
	// token RefTok[r] of sequence RefSeq[r] for r in [RefStart[c], RefStart[c+1]). Only tokens
	// whose Sequence.Loss is set get a reference; a node shared by k sequences' loss tokens has k.
	RefStart []int32
	RefSeq   []int32
	RefTok   []int32

	// Seqs are the sequences packed here (ids = indices into Pack's input), in pre-order, and
	// SeqEnd[k] the node of the last token of Seqs[k]: walking Parent from it back to a root
	// spells the sequence in reverse.
	Seqs   []int32
	SeqEnd []int32
}

// Visible reports whether query node i may attend to key node j (the mask rule).
func (m *MicroBatch) Visible(i, j int) bool {
	return j <= i && i <= int(m.SubtreeEnd[j])
}

// SequenceTokens rebuilds sequence k of this micro-batch (k indexes Seqs) by walking from its last
// node to the root.
func (m *MicroBatch) SequenceTokens(k int) []int32 {
	n := m.SeqEnd[k]
	out := make([]int32, m.Positions[n]+1)
	for ; n >= 0; n = m.Parent[n] {
		out[m.Positions[n]] = m.Tokens[n]
	}
	return out
}

// Validate checks every structural invariant of the contract: equal lengths, pre-order with
// Parent[i] < i, Positions = depth, SubtreeEnd exactly the last descendant, CSR references in
// range and at the node whose depth is the referenced token index. The backend and the loss rely
// on these; Pack's output always satisfies them.
func (m *MicroBatch) Validate() error {
	n := len(m.Tokens)
	if len(m.Positions) != n || len(m.Parent) != n || len(m.SubtreeEnd) != n {
		return fmt.Errorf("prefixtree: micro-batch: lengths differ: tokens %d positions %d parent %d subtree_end %d",
			n, len(m.Positions), len(m.Parent), len(m.SubtreeEnd))
	}
	// open holds the ancestors of the current node whose subtree is still open.
	open := make([]int32, 0, 64)
	for i := 0; i < n; i++ {
		for len(open) > 0 && int(m.SubtreeEnd[open[len(open)-1]]) < i {
			open = open[:len(open)-1]
		}
		p := m.Parent[i]
		end := m.SubtreeEnd[i]
		if int(end) < i || int(end) >= n {
			return fmt.Errorf("prefixtree: micro-batch: node %d: subtree end %d outside [%d, %d)", i, end, i, n)
		}
		if p == -1 {
			if len(open) != 0 {
				return fmt.Errorf("prefixtree: micro-batch: root %d inside the subtree of %d", i, open[len(open)-1])
			}
			if m.Positions[i] != 0 {
				return fmt.Errorf("prefixtree: micro-batch: root %d at position %d", i, m.Positions[i])
			}
		} else {
			if len(open) == 0 || open[len(open)-1] != p {
				return fmt.Errorf("prefixtree: micro-batch: node %d: parent %d is not its innermost enclosing subtree (pre-order broken)", i, p)
			}
			if m.Positions[i] != m.Positions[p]+1 {
				return fmt.Errorf("prefixtree: micro-batch: node %d at position %d, parent %d at %d", i, m.Positions[i], p, m.Positions[p])
			}
			if end > m.SubtreeEnd[p] {
				return fmt.Errorf("prefixtree: micro-batch: node %d's subtree ends at %d past its parent's %d", i, end, m.SubtreeEnd[p])
			}
		}
		if i+1 < n && int(end) > i && m.Parent[i+1] != int32(i) {
			return fmt.Errorf("prefixtree: micro-batch: node %d has a subtree but %d is not its child", i, i+1)
		}
		open = append(open, int32(i))
	}
	if len(m.RefStart) != n+1 || m.RefStart[0] != 0 || int(m.RefStart[n]) != len(m.RefSeq) || len(m.RefTok) != len(m.RefSeq) {
		return fmt.Errorf("prefixtree: micro-batch: malformed reference CSR (%d starts, %d refs)", len(m.RefStart), len(m.RefSeq))
	}
	for c := 0; c < n; c++ {
		if m.RefStart[c] > m.RefStart[c+1] {
			return fmt.Errorf("prefixtree: micro-batch: reference starts decrease at node %d", c)
		}
		for r := m.RefStart[c]; r < m.RefStart[c+1]; r++ {
			if m.RefTok[r] != m.Positions[c] {
				return fmt.Errorf("prefixtree: micro-batch: node %d at depth %d refers to token %d of sequence %d", c, m.Positions[c], m.RefTok[r], m.RefSeq[r])
			}
			if m.Parent[c] < 0 {
				return fmt.Errorf("prefixtree: micro-batch: root %d carries loss", c)
			}
		}
	}
	if len(m.SeqEnd) != len(m.Seqs) {
		return fmt.Errorf("prefixtree: micro-batch: %d sequences but %d ends", len(m.Seqs), len(m.SeqEnd))
	}
	for k, e := range m.SeqEnd {
		if e < 0 || int(e) >= n {
			return fmt.Errorf("prefixtree: micro-batch: sequence %d ends at node %d of %d", m.Seqs[k], e, n)
		}
	}
	return nil
}

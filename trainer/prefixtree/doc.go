// Package prefixtree merges the token sequences of a training batch into prefix tries and packs
// them into micro-batches for the model backend.
//
// Why: in τ²-style agent training every LLM call of an episode is one training sequence
// (prompt ‖ completion), and the calls of a batch share long prefixes — the system prompt with the
// domain policy and tool schemas (~2k tokens) is common to every call of a domain, and the calls of
// one episode repeat the conversation so far. Running the model over each sequence separately
// recomputes those prefixes over and over; a trie computes every distinct prefix once. AReaL reports
// up to 10× fewer FLOPs on τ² from this alone.
//
// The package has three layers, each in its own small file (modelled on nats-server's
// server/stree):
//
//   - Tree (tree.go, node.go, children.go): a radix trie over []int32 token sequences. Edge labels
//     are (sequence, start, end) references into the caller's slices, so inserting copies no
//     tokens; inserting n tokens costs O(n) comparisons.
//   - Walk (walk.go): a depth-first walk that lists the sequences in trie pre-order together with
//     the longest common prefix (LCP) of each with its predecessor. In that order the union of the
//     paths of any contiguous run of sequences costs len(first) + Σ (len − LCP) tokens, which makes
//     packing a one-dimensional problem.
//   - Pack (pack.go, emit.go): splits the pre-order into contiguous runs, one per micro-batch, with
//     a dynamic program that minimises packed tokens + an overhead per micro-batch under the
//     max_tokens_per_mb budget (whole trees stay together when they fit; a tree that does not fit is
//     split at subtree boundaries and the ancestor path is duplicated into each part), then emits
//     each run as a MicroBatch.
//
// A MicroBatch is in depth-first (pre-)order, so every ancestor precedes its descendants and each
// subtree is a contiguous index range. The attention mask needs no N×N matrix: key j is visible to
// query i exactly when j ≤ i ≤ SubtreeEnd[j]. Positions are the depth of a node in its original
// sequence(s), Parent the index of the previous token of the sequence(s) through it.
//
// The loss needs, for each node, the sequences whose loss tokens it is: a node's log-prob is the
// same for every sequence through it (same context), but advantages and behaviour log-probs belong
// to the sequence. MicroBatch keeps these references in CSR form (RefStart, RefSeq, RefTok): the
// loss gathers per-sequence data through them and sums the per-reference gradients onto the node,
// which is exactly the gradient of training every sequence separately.
package prefixtree

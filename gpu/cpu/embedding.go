package cpu

// Embedding: the residual stream starts as the token's row of model.embed_tokens.weight [V,H].

// embeddingForward sets out[i,:] = wte[tokens[i],:] for each of the N tokens (width H).
func embeddingForward[T float](out, wte []T, tokens []int32, H int) {
	for i, t := range tokens {
		copy(out[i*H:(i+1)*H], wte[int(t)*H:(int(t)+1)*H])
	}
}

// embeddingBackward accumulates dwte[tokens[i],:] += dout[i,:]. Repeated tokens add up, which is
// why it runs sequentially (two rows may hit the same vocabulary row).
func embeddingBackward[T float](dwte, dout []T, tokens []int32, H int) {
	for i, t := range tokens {
		axpy(1, dout[i*H:(i+1)*H], dwte[int(t)*H:(int(t)+1)*H])
	}
}

package protocol

// Model discovery: OpenAI's GET /v1/models (vLLM, the proxy, every server of the project) and
// SGLang's GET /model_info, where tau2rl's reloads can read the served weight version.

// Model is one entry of /v1/models. Root and MaxModelLen are vLLM's additions (the checkpoint
// directory and the context length), omitted where a server has none.
type Model struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	Root        string `json:"root,omitempty"`
	MaxModelLen int    `json:"max_model_len,omitempty"`
}

// NewModel is a /v1/models entry with object "model".
func NewModel(id, ownedBy string, created int64) Model {
	return Model{ID: id, Object: "model", Created: created, OwnedBy: ownedBy}
}

// ModelList is the /v1/models answer.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// Models lists models under object "list".
func Models(m ...Model) ModelList { return ModelList{Object: "list", Data: m} }

// ModelInfo is SGLang's GET /model_info (§2). ServedModelName and ContextLength are
// tau2-sampler's additions.
type ModelInfo struct {
	ModelPath               string         `json:"model_path"`
	TokenizerPath           string         `json:"tokenizer_path"`
	IsGeneration            bool           `json:"is_generation"`
	PreferredSamplingParams map[string]any `json:"preferred_sampling_params"`
	WeightVersion           string         `json:"weight_version"`
	HasImageUnderstanding   bool           `json:"has_image_understanding"`
	HasAudioUnderstanding   bool           `json:"has_audio_understanding"`
	ModelType               string         `json:"model_type"`
	Architectures           []string       `json:"architectures"`
	ServedModelName         string         `json:"served_model_name,omitempty"`
	ContextLength           int            `json:"context_length,omitempty"`
	// GPUUUID is tau2rl's additive field: the UUID of the GPU a tau2-sampler with the cuda
	// backend runs on (nvidia-smi's "GPU-…"), absent elsewhere. A trainer on the same GPU updates
	// it by CUDA IPC (POST /update_weights_from_ipc) under reload.mode=auto.
	GPUUUID string `json:"gpu_uuid,omitempty"`
	// WeightSync is tau2rl's additive field: the backends (WeightSyncNCCL, WeightSyncTCP) by
	// which a tau2-sampler joins a tau2rl trainer's weight-sync group (POST
	// /init_weights_update_group with tau2rl's rendezvous, docs/INFERENCE.md §4c); absent on
	// SGLang, whose group a tau2rl trainer cannot form. reload.mode=auto/distributed use it.
	WeightSync []string `json:"weight_sync,omitempty"`
}

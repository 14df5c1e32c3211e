package banking_knowledge

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/knowledge"
	"tau2rl/tau2/pyjson"
)

// Domain is the registry name.
const Domain = "banking_knowledge"

// DefaultRetrieval is the configuration used when env.Options.Retrieval is
// empty. Upstream's default, "alltools", needs an embeddings API and the
// shell sandbox; this port defaults to bm25, the offline configuration
// whose tools are fully deterministic (docs/TAU2.md §11).
const DefaultRetrieval = "bm25"

// variant is one retrieval configuration (upstream RetrievalVariant).
type variant struct {
	name     string
	template string // prompts/<template>.md
	kbSearch bool   // BM25 KB_search
	grep     bool
	fullKB   bool // {{full_knowledge_base}} inlined
	golden   bool // {{required_documents}} inlined per task
	shell    bool // read-only shell in the bubblewrap sandbox
	dense    bool // KB_search by embeddings (OpenAI-compatible endpoint)
}

// variants lists the configurations this port implements, by name.
var variants = map[string]variant{
	"no_knowledge":           {name: "no_knowledge", template: "no_knowledge"},
	"full_kb":                {name: "full_kb", template: "full_kb", fullKB: true},
	"golden_retrieval":       {name: "golden_retrieval", template: "required_docs", golden: true},
	"grep_only":              {name: "grep_only", template: "grep_only", grep: true},
	"bm25":                   {name: "bm25", template: "classic_rag_bm25_no_grep", kbSearch: true},
	"bm25_grep":              {name: "bm25_grep", template: "classic_rag_bm25", kbSearch: true, grep: true},
	"terminal_use":           {name: "terminal_use", template: "agentic_search", shell: true},
	"openai_embeddings":      {name: "openai_embeddings", template: "classic_rag_openai_no_grep", kbSearch: true, dense: true},
	"openai_embeddings_grep": {name: "openai_embeddings_grep", template: "classic_rag_openai", kbSearch: true, dense: true, grep: true},
}

// DefaultEmbeddingsModel is upstream's OpenAI embedding model.
const DefaultEmbeddingsModel = "text-embedding-3-large"

// Retrievals lists the implemented retrieval configuration names, sorted.
func Retrievals() []string {
	out := make([]string, 0, len(variants))
	for k := range variants {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// upstreamOnly are upstream's other configurations, refused with a clear error.
var upstreamOnly = []string{"alltools", "alltools-qwen", "AllTools", "qwen_embeddings", "qwen_embeddings_grep",
	"qwen_embeddings_reranker", "qwen_embeddings_reranker_grep",
	"openai_embeddings_reranker", "openai_embeddings_reranker_grep", "bm25_reranker", "bm25_reranker_grep",
	"terminal_use_write"}

// base is the data loaded once per process and data directory.
type base struct {
	db      *DB
	kb      *knowledge.KB
	bm25    *knowledge.BM25
	prompts map[string]string // template name -> policy after component substitution

	mu        sync.Mutex
	toolkits  map[string]*env.Toolkit
	userTools *env.Toolkit
	sandbox   *knowledge.Sandbox // terminal_use's, exported once per process
}

func load(dataDir string) (*base, error) {
	return env.LoadOnce(Domain+":"+dataDir, func() (*base, error) {
		b := &base{prompts: map[string]string{}, toolkits: map[string]*env.Toolkit{}}
		text, err := data.ReadFile(dataDir, Domain, "db.json")
		if err != nil {
			return nil, err
		}
		var db DB
		if err := pyjson.Unmarshal([]byte(text), &db); err != nil {
			return nil, fmt.Errorf("%s: db.json: %w", Domain, err)
		}
		db.state = (*toolState)(nil).clone()
		b.db = &db
		dir := data.DomainDir(dataDir, Domain)
		if b.kb, err = knowledge.Load(filepath.Join(dir, "documents")); err != nil {
			return nil, err
		}
		corpus := make([][]string, b.kb.Len())
		for i, d := range b.kb.Docs {
			corpus[i] = knowledge.Tokenize(d.Content)
		}
		b.bm25 = knowledge.NewBM25(corpus)
		for _, v := range variants {
			p, err := loadTemplate(filepath.Join(dir, "prompts"), v.template)
			if err != nil {
				return nil, err
			}
			if v.fullKB {
				p = strings.ReplaceAll(p, "{{full_knowledge_base}}", b.kb.FullMarkdown())
			}
			b.prompts[v.name] = p
		}
		b.userTools = env.MustToolkit("KnowledgeUserTools", baseUserTools())
		return b, nil
	})
}

var componentRE = regexp.MustCompile(`\{\{component:(\w+)\}\}`)

// loadTemplate is load_prompt_template without the KB: every
// {{component:NAME}} becomes prompts/components/NAME.md.
func loadTemplate(dir, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, name+".md"))
	if err != nil {
		return "", fmt.Errorf("%s: prompt template: %w", Domain, err)
	}
	var ferr error
	out := componentRE.ReplaceAllStringFunc(string(b), func(m string) string {
		c := componentRE.FindStringSubmatch(m)[1]
		cb, err := os.ReadFile(filepath.Join(dir, "components", c+".md"))
		if err != nil && ferr == nil {
			ferr = fmt.Errorf("%s: Component not found: %w", Domain, err)
		}
		return string(cb)
	})
	return out, ferr
}

// goldenPolicy is golden_prompt: the task's required documents (by title,
// else by id) inlined for {{required_documents}}.
func (b *base) goldenPolicy(task *data.Task) string {
	// title_to_doc is a dict comprehension: the last document of a title wins
	byTitle := map[string]knowledge.Document{}
	for _, d := range b.kb.Docs {
		byTitle[d.Title] = d
	}
	var parts []string
	if task != nil {
		for _, ref := range task.RequiredDocuments {
			d, ok := byTitle[ref]
			if !ok {
				d, ok = b.kb.Get(ref)
			}
			if ok {
				parts = append(parts, "## "+d.Title+"\n\n"+d.Content)
			}
		}
	}
	text := "(No documents provided)"
	if len(parts) > 0 {
		text = strings.Join(parts, "\n\n---\n\n")
	}
	return strings.ReplaceAll(b.prompts["golden_retrieval"], "{{required_documents}}", text)
}

// toolkit returns the agent toolkit of a variant (built once per
// variant, and per endpoint and model for the dense ones).
func (b *base) toolkit(v variant, opts env.Options) (*env.Toolkit, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := v.name
	if v.dense {
		if opts.EmbeddingsModel == "" {
			opts.EmbeddingsModel = DefaultEmbeddingsModel
		}
		key += "|" + opts.EmbeddingsURL + "|" + opts.EmbeddingsModel
	}
	if tk, ok := b.toolkits[key]; ok {
		return tk, nil
	}
	var tools []*env.Tool
	if v.shell {
		if b.sandbox == nil {
			sb, err := knowledge.NewSandbox(b.kb, "")
			if err != nil {
				return nil, fmt.Errorf("retrieval config %s: %w", v.name, err)
			}
			b.sandbox = sb
		}
		tools = append(tools, b.shellTool())
	}
	if v.kbSearch && v.dense {
		t, err := b.denseSearchTool(opts)
		if err != nil {
			return nil, fmt.Errorf("retrieval config %s: %w", v.name, err)
		}
		tools = append(tools, t)
	} else if v.kbSearch {
		tools = append(tools, b.kbSearchTool())
	}
	if v.grep {
		tools = append(tools, b.grepTool())
	}
	tools = append(tools, baseAgentTools()...)
	tk := env.MustToolkit("KnowledgeTools", tools)
	b.toolkits[key] = tk
	return tk, nil
}

// denseSearchTool is KB_search over an embedding index (top 10). The
// documents are embedded once per process (and cached on disk by content
// hash); each search embeds the query.
func (b *base) denseSearchTool(opts env.Options) (*env.Tool, error) {
	if opts.EmbeddingsURL == "" {
		return nil, fmt.Errorf("needs embeddings_url: the base URL (…/v1) of an OpenAI-compatible embeddings API, e.g. https://api.openai.com/v1 with $OPENAI_API_KEY")
	}
	cacheDir := os.Getenv("TAU2_EMBEDDINGS_CACHE")
	if cacheDir == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("embedding cache: %w (set TAU2_EMBEDDINGS_CACHE)", err)
		}
		cacheDir = filepath.Join(d, "tau2rl", "embeddings")
	}
	d := &knowledge.Dense{KB: b.kb, TopK: 10, Cache: &knowledge.EmbeddingCache{Dir: cacheDir},
		Embedder: &knowledge.Embedder{BaseURL: opts.EmbeddingsURL, Model: opts.EmbeddingsModel, APIKey: os.Getenv("OPENAI_API_KEY")}}
	if err := d.Index(context.Background()); err != nil {
		return nil, fmt.Errorf("indexing the %d documents: %w", b.kb.Len(), err)
	}
	return env.NewTool("KB_search", env.Read, schemas.Get("KB_search"), func(db *DB, a *env.Args) (any, error) {
		q := a.Raw("query")
		qs, ok := q.(string)
		if !ok {
			return nil, fmt.Errorf("'%s' object has no attribute 'strip'", pyjson.TypeName(q))
		}
		t0 := time.Now()
		hits, err := d.Search(context.Background(), qs)
		if err != nil {
			return nil, err
		}
		return b.kbSearchText(hits, time.Since(t0)), nil
	}), nil
}

// shellTool is ShellMixin.shell over the sandbox.
func (b *base) shellTool() *env.Tool {
	return env.NewTool("shell", env.Read, schemas.Get("shell"), func(db *DB, a *env.Args) (any, error) {
		c := a.Raw("command")
		cmd, ok := c.(string)
		if !ok {
			return nil, fmt.Errorf("expected string or bytes-like object, got '%s'", pyjson.TypeName(c))
		}
		rc, out, errText := b.sandbox.Run(context.Background(), cmd)
		if rc != 0 {
			if rc == 1 && strings.Contains(cmd, "grep") && errText == "" {
				return "No matches found.", nil
			}
			if errText != "" {
				return fmt.Sprintf("Error (exit code %d): %s", rc, errText), nil
			}
			return fmt.Sprintf("Command failed with exit code %d", rc), nil
		}
		if out == "" {
			return "(no output)", nil
		}
		return out, nil
	})
}

// formatHits is the result listing shared by KB_search and grep.
func (b *base) formatHits(hits []knowledge.Hit) string {
	parts := make([]string, len(hits))
	for i, h := range hits {
		d, _ := b.kb.Get(h.ID)
		title := d.Title
		if title == "" {
			title = "Untitled"
		}
		parts[i] = fmt.Sprintf("%d. %s\n   ID: %s\n   Score: %s\n   Content: %s\n", i+1, title, h.ID, fmt4(h.Score), d.Content)
	}
	return strings.Join(parts, "\n")
}

func fmt4(x float64) string { return fmt.Sprintf("%.4f", x) }

// kbSearchTool is KBSearchMixin.KB_search over the BM25 pipeline (top 10).
// Its text ends with upstream's timing line; the milliseconds are this
// process's own (upstream's are its own too), so the tool is a read whose
// text is never compared in grading.
func (b *base) kbSearchTool() *env.Tool {
	t := env.NewTool("KB_search", env.Read, schemas.Get("KB_search"), func(db *DB, a *env.Args) (any, error) {
		q := a.Raw("query")
		qs, ok := q.(string)
		if !ok {
			return nil, fmt.Errorf("'%s' object has no attribute 'strip'", pyjson.TypeName(q))
		}
		t0 := time.Now()
		idx := b.bm25.TopK(qs, 10)
		retrieval := time.Since(t0)
		hits := make([]knowledge.Hit, len(idx))
		scores := b.bm25.Scores(knowledge.Tokenize(qs))
		for i, j := range idx {
			hits[i] = knowledge.Hit{ID: b.kb.Docs[j].ID, Score: scores[j]}
		}
		return b.kbSearchText(hits, retrieval), nil
	})
	return t
}

// kbSearchText is _format_kb_search_result: the listing (or "No relevant
// documents found.") and the timing line. Upstream also times its (empty)
// post-processing loop, whose few nanoseconds are > 0: so "reranking=0ms".
func (b *base) kbSearchText(hits []knowledge.Hit, retrieval time.Duration) string {
	t1 := time.Now()
	post := time.Since(t1)
	out := "No relevant documents found."
	if len(hits) > 0 {
		out = b.formatHits(hits)
	}
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	out += fmt.Sprintf("\n\n[Timing: retrieval=%.0fms", ms(retrieval))
	if post > 0 {
		out += fmt.Sprintf(", reranking=%.0fms", ms(post))
	}
	return out + fmt.Sprintf(", total=%.0fms]", ms(retrieval)+ms(post))
}

// grepTool is GrepMixin.grep (top 10, case-insensitive).
func (b *base) grepTool() *env.Tool {
	g := &knowledge.Grep{KB: b.kb, TopK: 10}
	return env.NewTool("grep", env.Read, schemas.Get("grep"), func(db *DB, a *env.Args) (any, error) {
		p := a.Raw("pattern")
		ps, ok := p.(string)
		if !ok {
			return nil, fmt.Errorf("'%s' object has no attribute 'strip'", pyjson.TypeName(p))
		}
		hits := g.Search(ps)
		if len(hits) == 0 {
			return "No matches found for pattern: " + ps, nil
		}
		return b.formatHits(hits), nil
	})
}

// New builds a banking_knowledge environment (upstream get_environment).
// The agent and the user share one DB, as upstream's toolkits do.
func New(opts env.Options) (*env.Environment, error) {
	if opts.Solo {
		return nil, fmt.Errorf("banking_knowledge domain does not support solo mode")
	}
	dir, err := data.Dir(opts.DataDir)
	if err != nil {
		return nil, err
	}
	b, err := load(dir)
	if err != nil {
		return nil, err
	}
	name := opts.Retrieval
	if name == "" {
		name = DefaultRetrieval
	}
	v, ok := variants[name]
	if !ok {
		for _, u := range upstreamOnly {
			if u == name {
				return nil, fmt.Errorf("retrieval config %q is upstream's but not implemented by this port (implemented: %v)", name, Retrievals())
			}
		}
		return nil, fmt.Errorf("Unknown retrieval variant: %q. Available: %v", name, Retrievals())
	}
	tk, err := b.toolkit(v, opts)
	if err != nil {
		return nil, err
	}
	db := b.db.Fork().(*DB)
	e := &env.Environment{
		Domain: Domain,
		Policy: b.prompts[v.name],
		Agent:  env.Side{Toolkit: tk, DB: db},
		User:   env.Side{Toolkit: b.userTools, DB: db},
	}
	if v.golden {
		e.Policy = b.goldenPolicy(nil)
	}
	e.TaskSetup = func(e *env.Environment, task *data.Task) error {
		if v.golden {
			e.Policy = b.goldenPolicy(task)
		}
		st := e.Agent.DB.(*DB).state
		st.readLogAllow = readLogAllowlist(task)
		return nil
	}
	return e, nil
}

// readLogAllowlist is τ²'s _derive_read_log_allowlist: the agent_tool_name
// of every gold call_discoverable_agent_tool action.
func readLogAllowlist(task *data.Task) map[string]bool {
	out := map[string]bool{}
	if task == nil || task.EvaluationCriteria == nil {
		return out
	}
	for _, a := range task.EvaluationCriteria.Actions {
		if a.Name != "call_discoverable_agent_tool" || a.Arguments == nil {
			continue
		}
		if n, ok := a.Arguments.Get("agent_tool_name"); ok && truthy(n) {
			if s, ok := n.(string); ok {
				out[s] = true
			}
		}
	}
	return out
}

func init() { env.Register(Domain, New) }

package episode

import (
	"fmt"
	"strconv"
	"strings"
)

// Tag identifies the episode an LLM request belongs to. It is sent as the
// request id (SGLang "rid", vLLM "request_id") and as the OpenAI "user"
// field of chat requests, so server logs can be tied to trajectories, and so
// that the scripted test server (lib/inference/scripted) can find the task whose
// gold actions it plays. Its text form is
//
//	tau2rl/<episode id>/<role><call>/<domain>/<task id>
//
// with role "a" (agent) or "u" (user); the task id comes last and may hold
// any characters.
type Tag struct {
	Episode string
	Role    string // "a" or "u"
	Call    int
	Domain  string
	TaskID  string
}

// tagPrefix starts every tag.
const tagPrefix = "tau2rl/"

// String renders the tag.
func (t Tag) String() string {
	return tagPrefix + t.Episode + "/" + t.Role + strconv.Itoa(t.Call) + "/" + t.Domain + "/" + t.TaskID
}

// ParseTag reads a tag written by Tag.String.
func ParseTag(s string) (Tag, error) {
	rest, ok := strings.CutPrefix(s, tagPrefix)
	if !ok {
		return Tag{}, fmt.Errorf("episode: tag %q does not start with %q", s, tagPrefix)
	}
	parts := strings.SplitN(rest, "/", 4)
	if len(parts) != 4 || parts[0] == "" || len(parts[1]) < 2 || parts[2] == "" || parts[3] == "" {
		return Tag{}, fmt.Errorf("episode: tag %q: want %s<episode>/<role><call>/<domain>/<task>", s, tagPrefix)
	}
	role := parts[1][:1]
	if role != "a" && role != "u" {
		return Tag{}, fmt.Errorf("episode: tag %q: role %q is not a or u", s, role)
	}
	n, err := strconv.Atoi(parts[1][1:])
	if err != nil || n < 0 {
		return Tag{}, fmt.Errorf("episode: tag %q: bad call number %q", s, parts[1][1:])
	}
	return Tag{Episode: parts[0], Role: role, Call: n, Domain: parts[2], TaskID: parts[3]}, nil
}

package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	"tau2rl/schemas"
)

// RewardRequest sets a session's reward: the episode reward and, optionally,
// one reward per recorded call (LLMCall.ShapedReward; default the episode
// reward).
type RewardRequest struct {
	Reward      *float64  `json:"reward"`
	CallRewards []float64 `json:"call_rewards,omitempty"`
}

// FinishRequest finishes a session. Reward and CallRewards may be given here
// or earlier with /reward; a session finishes only with a reward.
// Termination defaults to agent_stop.
type FinishRequest struct {
	RewardRequest
	Termination string            `json:"termination,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
}

// AbortRequest drops a session without a trajectory: the client's episode
// failed for a reason that is not the policy's (its tool backend died, …).
type AbortRequest struct {
	Error string `json:"error"`
}

// SessionInfo is the session API's view of a session.
type SessionInfo struct {
	SessionMeta
	TrajectoryID  string   `json:"trajectory_id"`
	TaskID        string   `json:"task_id"`
	Status        string   `json:"status"` // open, finishing, finished, aborted, expired, shutdown
	Calls         int      `json:"calls"`
	Messages      int      `json:"messages"`
	TemplateDrift int      `json:"template_drift"`
	Reward        *float64 `json:"reward"`
}

func readJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &APIError{Status: http.StatusRequestEntityTooLarge, Type: errInvalidRequest, Code: "request_too_large",
				Message: fmt.Sprintf("request body exceeds %d bytes (limits.max_request_bytes)", mbe.Limit)}
		}
		return badRequest("", "read body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if ae := decodeJSON(body, v, "the session API's request"); ae != nil {
		return ae
	}
	return nil
}

func (s *Server) info(sess *session) SessionInfo {
	status := map[phase]string{phaseOpen: "open", phaseFinishing: "finishing", phaseDone: sess.outcome}[sess.phase]
	return SessionInfo{SessionMeta: sess.meta, TrajectoryID: sess.traj.ID, TaskID: sess.traj.TaskID, Status: status,
		Calls: len(sess.calls), Messages: len(sess.conversation()), TemplateDrift: sess.drift, Reward: sess.reward}
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.lookup(r)
	if err != nil {
		return err
	}
	sess.mu.Lock()
	info := s.info(sess)
	sess.mu.Unlock()
	writeJSON(w, http.StatusOK, info)
	return nil
}

// applyReward checks and stores a reward under the session's lock.
func applyReward(sess *session, rr RewardRequest) error {
	if rr.Reward == nil && rr.CallRewards == nil {
		return nil
	}
	// Rewards outside ±schemas.MaxAbsReward would make an invalid trajectory (and once, at
	// 1e308, NaN advantages in the trainer): refuse them here, where the client can be told.
	// (schemas.RewardInRange; spelled out here: NaN compares false.)
	if rr.Reward != nil && !(math.Abs(*rr.Reward) <= schemas.MaxAbsReward) {
		return badRequest("reward", "reward %v is outside the accepted range [%v, %v]", *rr.Reward, -schemas.MaxAbsReward, schemas.MaxAbsReward)
	}
	for i, r := range rr.CallRewards {
		if !(math.Abs(r) <= schemas.MaxAbsReward) {
			return badRequest("call_rewards", "call_rewards[%d] = %v is outside the accepted range [%v, %v]", i, r, -schemas.MaxAbsReward, schemas.MaxAbsReward)
		}
	}
	if rr.CallRewards != nil && len(rr.CallRewards) != len(sess.calls) {
		return badRequest("call_rewards", "call_rewards has %d values; the session has recorded %d calls", len(rr.CallRewards), len(sess.calls))
	}
	if rr.Reward != nil {
		v := *rr.Reward
		sess.reward = &v
	}
	if rr.CallRewards != nil {
		sess.callRew = append([]float64(nil), rr.CallRewards...)
	}
	return nil
}

// open checks a session can take a reward or a finish.
func openForReward(sess *session) error {
	switch sess.phase {
	case phaseFinishing:
		return &APIError{Status: http.StatusConflict, Type: errConflict, Code: "session_finishing", Param: "session",
			Message: fmt.Sprintf("session %q is being finished", sess.meta.ID)}
	case phaseDone:
		return endedError(sess.meta.ID, endedSession{outcome: sess.outcome, trajectoryID: map[bool]string{true: sess.traj.ID}[sess.outcome == "finished"]})
	}
	if sess.inflight > 0 {
		return &APIError{Status: http.StatusConflict, Type: errConflict, Code: "calls_in_flight", Param: "session",
			Message: fmt.Sprintf("session %q has %d calls in flight; reward it once they are answered", sess.meta.ID, sess.inflight)}
	}
	return nil
}

func (s *Server) setReward(w http.ResponseWriter, r *http.Request) error {
	var rr RewardRequest
	if err := readJSON(r, &rr); err != nil {
		return err
	}
	if rr.Reward == nil && rr.CallRewards == nil {
		return badRequest("reward", "give reward and/or call_rewards")
	}
	sess, err := s.lookup(r)
	if err != nil {
		return err
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if err := openForReward(sess); err != nil {
		return err
	}
	if err := applyReward(sess, rr); err != nil {
		return err
	}
	sess.lastUsed = time.Now().UTC()
	writeJSON(w, http.StatusOK, s.info(sess))
	return nil
}

// finish publishes the session's trajectory, exactly once: the session is
// marked finishing while it publishes (a concurrent finish, reward or call
// is refused with 409), ends when the broker acknowledged, and stays open
// for a retry when publishing failed (503).
func (s *Server) finish(w http.ResponseWriter, r *http.Request) error {
	var fr FinishRequest
	if err := readJSON(r, &fr); err != nil {
		return err
	}
	sess, err := s.lookup(r)
	if err != nil {
		return err
	}
	sess.mu.Lock()
	if err := openForReward(sess); err != nil {
		sess.mu.Unlock()
		return err
	}
	if len(sess.calls) == 0 {
		sess.mu.Unlock()
		return badRequest("session", "session %q has no recorded calls: nothing to publish (abort it instead)", sess.meta.ID)
	}
	saved, savedCalls := sess.reward, sess.callRew
	if err := applyReward(sess, fr.RewardRequest); err != nil {
		sess.mu.Unlock()
		return err
	}
	if sess.reward == nil {
		sess.reward, sess.callRew = saved, savedCalls
		sess.mu.Unlock()
		return badRequest("reward", "session %q has no reward: give one here or with /reward (a session that failed for other reasons is aborted, never rewarded)", sess.meta.ID)
	}
	t, err := s.trajectory(sess, fr)
	if err == nil {
		err = t.Validate()
	}
	if err != nil {
		sess.mu.Unlock()
		return &APIError{Status: http.StatusBadRequest, Type: errInvalidRequest, Message: err.Error()}
	}
	sess.phase = phaseFinishing
	sess.mu.Unlock()

	perr := s.publishTrajectory(r.Context(), t)
	sess.mu.Lock()
	if perr != nil {
		sess.phase = phaseOpen
		sess.mu.Unlock()
		return &APIError{Status: http.StatusServiceUnavailable, Type: errServer, Code: "publish_failed",
			Message: fmt.Sprintf("the trajectory could not be published (the session stays open; retry the finish): %v", perr)}
	}
	sess.phase, sess.outcome = phaseDone, "finished"
	info := s.info(sess)
	sess.mu.Unlock()
	s.end(sess.meta.ID, "finished", t.ID)
	s.log.Info("session finished", "session", sess.meta.ID, "trajectory", t.ID, "task", t.TaskID, "calls", len(t.Calls), "reward", t.Reward)
	writeJSON(w, http.StatusOK, info)
	return nil
}

// trajectory builds the session's trajectory (under its lock): a copy, so a
// failed publish leaves the session as it was.
func (s *Server) trajectory(sess *session, fr FinishRequest) (*schemas.Trajectory, error) {
	t := sess.traj
	t.Calls = make([]schemas.LLMCall, 0, len(sess.calls))
	for _, c := range sess.calls {
		if _, err := t.AppendCall(c); err != nil {
			return nil, fmt.Errorf("proxy: record call: %w", err)
		}
	}
	t.Messages = append([]schemas.Message(nil), sess.conversation()...)
	for i := range t.Messages {
		t.Messages[i].Turn = i
	}
	t.Reward, t.ShapedReward = *sess.reward, *sess.reward
	for i := range t.Calls {
		t.Calls[i].ShapedReward = *sess.reward
		if sess.callRew != nil {
			t.Calls[i].ShapedReward = sess.callRew[i]
		}
	}
	t.Termination = fr.Termination
	if t.Termination == "" {
		t.Termination = schemas.TerminationAgentStop
	}
	t.Tags = make(map[string]string, len(sess.traj.Tags)+len(fr.Tags))
	for k, v := range fr.Tags {
		t.Tags[k] = v
	}
	for k, v := range sess.traj.Tags {
		t.Tags[k] = v
	}
	t.EndedAt = time.Now().UTC()
	return &t, nil
}

func (s *Server) publishTrajectory(ctx context.Context, t *schemas.Trajectory) error {
	f, err := schemas.FrameTrajectories(t)
	if err != nil {
		return fmt.Errorf("proxy: frame trajectory: %w", err)
	}
	// The publish outlives a client that hangs up: a finish that reached
	// the broker must end the session, or it would be published twice.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownGrace)
	defer cancel()
	if err := s.d.Trajectories.PublishFramed(pctx, f); err != nil {
		s.m.PublishErrors.WithLabelValues("trajectories").Inc()
		return err
	}
	return nil
}

func (s *Server) abort(w http.ResponseWriter, r *http.Request) error {
	var ar AbortRequest
	if err := readJSON(r, &ar); err != nil {
		return err
	}
	if ar.Error == "" {
		return badRequest("error", "say why the session is aborted")
	}
	sess, err := s.lookup(r)
	if err != nil {
		return err
	}
	sess.mu.Lock()
	err = openForReward(sess)
	sess.mu.Unlock()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.ShutdownGrace)
	defer cancel()
	if err := s.drop(ctx, sess, "aborted", "proxy_client_abort", "aborted by the client: "+ar.Error); err != nil {
		var ae *APIError
		if errors.As(err, &ae) {
			return ae
		}
		return &APIError{Status: http.StatusServiceUnavailable, Type: errServer, Code: "publish_failed",
			Message: fmt.Sprintf("the abort record could not be published (the session stays open): %v", err)}
	}
	sess.mu.Lock()
	info := s.info(sess)
	sess.mu.Unlock()
	writeJSON(w, http.StatusOK, info)
	return nil
}

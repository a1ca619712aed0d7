package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/oikos-hq/oikos/agent/internal/apiclient"
	"github.com/oikos-hq/oikos/agent/internal/storage"
	"github.com/oikos-hq/oikos/agent/internal/tasks"
	api "github.com/oikos-hq/oikos/shared/apiclient"
)

type goalIn struct {
	Goal string `json:"goal" jsonschema:"what the task is for, one sentence"`
}

type planIn struct {
	Steps []string `json:"steps" jsonschema:"ordered steps; first research (read-only), last write back what was learned"`
}

type stepIn struct {
	Step   int    `json:"step" jsonschema:"step number, from 1"`
	Status string `json:"status" jsonschema:"running, done or skipped"`
	Note   string `json:"note,omitempty"`
}

type completeIn struct {
	Outcome string `json:"outcome" jsonschema:"success, partial or failed"`
	Summary string `json:"summary" jsonschema:"what was done, what is left and why"`
}

type askIn struct {
	Question string   `json:"question"`
	Options  []string `json:"options,omitempty" jsonschema:"choices to offer, if any"`
}

func (c *Call) who() tasks.Who {
	return tasks.Who{Session: c.Session.ID, Actor: c.Actor, Source: c.Source}
}

// taskError is a task-model refusal as a tool result.
func taskError(name string, err error) Result {
	if errors.Is(err, tasks.ErrAlreadyComplete) {
		return Result{IsError: true, Render: "refusal", Text: "refused: " + err.Error()}
	}
	if errors.Is(err, tasks.ErrInvalid) {
		return Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), tasks.ErrInvalid.Error()+": "))
	}
	return Errorf("%s: %v", name, err)
}

func taskTools() []*Tool {
	goal := def("set_goal", "Set the task's goal before working; shows recent partial or failed tasks on the same targets.",
		Hints{Idempotent: true}, "task", func(s *jsonschema.Schema) { maxLen(s, "goal", tasks.MaxGoalLen) }, setGoal)
	plan := def("propose_plan", "Propose the task's plan as ordered steps; first step research, last step write back.",
		Hints{}, "plan",
		func(s *jsonschema.Schema) {
			maxLen(s, "steps", tasks.MaxSteps)
			two := 2
			s.Properties["steps"].MinItems = &two
		},
		func(ctx context.Context, c *Call, in planIn) Result {
			res, err := c.deps.Tasks.ProposePlan(ctx, c.who(), in.Steps)
			if err != nil {
				return taskError("propose_plan", err)
			}
			if res.Reopened {
				c.setTaskState(ctx, c.Session.Task, "in_progress")
			}
			return Result{Data: map[string]any{"generation": res.Generation, "steps": res.Steps, "replaced_steps": res.Replaced,
				"next": "Plan recorded. Stop and let the operator review it; then work through the steps with update_plan_step and run. Do not re-propose to advance."}}
		})
	step := def("update_plan_step", "Mark a plan step running, done or skipped as you work through the plan.",
		Hints{Idempotent: true}, "plan",
		func(s *jsonschema.Schema) {
			enum(s, "status", storage.StepRunning, storage.StepDone, storage.StepSkipped)
			bounds(s, "step", 1, tasks.MaxSteps)
		},
		func(ctx context.Context, c *Call, in stepIn) Result {
			st, err := c.deps.Tasks.UpdateStep(ctx, c.who(), in.Step, in.Status, in.Note)
			if err != nil {
				return taskError("update_plan_step", err)
			}
			return Result{Data: map[string]any{"step": in.Step, "text": st.Text, "status": st.Status,
				"next": "Advance with update_plan_step and run; do not re-propose the plan."}}
		})
	complete := def("complete_task", "Complete the task with an outcome (success, partial, failed) and a summary.",
		Hints{}, "task",
		func(s *jsonschema.Schema) {
			enum(s, "outcome", tasks.OutcomeSuccess, tasks.OutcomePartial, tasks.OutcomeFailed)
		},
		func(ctx context.Context, c *Call, in completeIn) Result {
			res, err := c.deps.Tasks.Complete(ctx, c.who(), in.Outcome, in.Summary)
			if err != nil {
				return taskError("complete_task", err)
			}
			state := "done"
			if in.Outcome != tasks.OutcomeSuccess {
				state = "blocked"
			}
			c.setTaskState(ctx, res.Session.Task, state)
			return Result{Data: map[string]any{"status": res.Session.Status, "outcome": res.Session.Outcome,
				"blocker": res.Session.Blocker, "closed_steps": res.ClosedSteps, "steps_closed_as": res.StepsClosedAs}}
		})
	ask := def("ask_operator", "Ask the operator a question and wait for the answer before going on.",
		Hints{}, "question",
		func(s *jsonschema.Schema) { maxLen(s, "question", 2000); maxLen(s, "options", 10) },
		func(ctx context.Context, c *Call, in askIn) Result {
			q, err := c.deps.Tasks.Ask(ctx, c.who(), in.Question, in.Options)
			if err != nil {
				return taskError("ask_operator", err)
			}
			return Result{Data: map[string]any{"question_id": q.ID, "question": q.Question, "options": q.Options,
				"next": "Asked. Stop and wait for the operator's answer."}}
		})
	out := []*Tool{goal, plan, step, complete, ask}
	for _, t := range out {
		t.gate = gateTask
	}
	return out
}

// setGoal creates the graph's task entity for the goal (so executions get task→involves edges),
// then records the goal; a replaced goal's task entity becomes superseded.
func setGoal(ctx context.Context, c *Call, in goalIn) Result {
	if strings.TrimSpace(in.Goal) == "" {
		return Errorf("set_goal: goal is empty: say what the task is for in one sentence")
	}
	prev := c.Session
	slug := prev.Task
	if !strings.EqualFold(strings.TrimSpace(prev.Goal), strings.TrimSpace(in.Goal)) || slug == "" {
		body := api.CreateEntity{Type: "task", Name: taskName(c.Session.ID), State: api.Ptr("in_progress"),
			Attributes: &api.Attributes{"goal": in.Goal, "session_id": c.Session.ID}}
		e, err := apiclient.Decode[struct {
			Slug string `json:"slug"`
		}](c.deps.API.API().CreateEntity(ctx, nil, body, c.as()...))
		if err != nil {
			return apiError(err)
		}
		slug = e.Slug
	}
	res, err := c.deps.Tasks.SetGoal(ctx, c.who(), in.Goal, slug)
	if err != nil {
		return taskError("set_goal", err)
	}
	if prev.Task != "" && prev.Task != slug {
		c.setTaskState(ctx, prev.Task, "superseded")
	}
	next := "Goal set. NEXT: research with read-only tools (knowledge first), then propose_plan. Do not run changes before the plan."
	data := map[string]any{"goal": res.Session.Goal, "task": slug, "status": res.Session.Status, "prior_tasks": res.Prior, "next": next}
	if res.Superseded != "" {
		data["superseded_goal"] = res.Superseded
	}
	if len(res.Prior) > 0 {
		data["next"] = "Goal set. Earlier tasks on the same targets ended partial or failed (prior_tasks): read why before repeating them. " + next
	}
	return Result{Data: data, Entity: slug}
}

// setTaskState moves the graph's task entity; a failure is logged, not the tool's error (the
// session's own status is the record of the task).
func (c *Call) setTaskState(ctx context.Context, slug, state string) {
	if slug == "" {
		return
	}
	if _, err := apiclient.Raw(c.deps.API.API().SetEntityState(ctx, slug, nil, api.SetState{State: state}, c.as()...)); err != nil {
		c.deps.Log.Warn().Err(err).Str("task", slug).Str("state", state).Msg("task entity state")
	}
}

// taskName is a unique name for a task entity of a session.
func taskName(session string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(session) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		}
		if b.Len() >= 40 {
			break
		}
	}
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	return strings.Trim(b.String(), "-") + "-" + hex.EncodeToString(rnd[:])
}

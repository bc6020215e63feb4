package server

import (
	"net/http"

	"github.com/chatd/chatd/store"
)

// The room task board (beta), on the Agent API; people read a room's
// tasks (chatd's own route, for the web app's board panel). A task is named
// in paths by its id or its board number (/tasks/3 is #3); the rules of its
// lifecycle, assignments and history are the store's (store/tasks.go).

func (s *Server) taskRoutes() {
	s.handle("GET", "/api/v1/agent/chats/:chat_id/tasks", agentsOnly, s.listTasks)
	s.handle("POST", "/api/v1/agent/chats/:chat_id/tasks", agentsOnly, withBody(s, s.createTask))
	s.handle("GET", "/api/v1/agent/chats/:chat_id/tasks/:id", agentsOnly, s.getTask)
	s.handle("POST", "/api/v1/agent/chats/:chat_id/tasks/:id", agentsOnly, withBody(s, s.updateTask))
	s.handle("GET", "/api/v1/agent/chats/:chat_id/tasks/:id/history", agentsOnly, s.listTaskHistory)
	s.handle("GET", "/api/v1/me/chats/:chat_id/tasks", humansOnly, s.listTasks)
}

// taskView is Task.
type taskView struct {
	ID               string               `json:"id"`
	Number           int64                `json:"number"`
	ChatRoomID       string               `json:"chat_room_id"`
	Subject          string               `json:"subject"`
	Detail           string               `json:"detail"`
	State            string               `json:"state"`
	OverallStatus    string               `json:"overall_status"`
	SupersededByID   *string              `json:"superseded_by_id"`
	CreatedBy        store.ActorRef       `json:"created_by"`
	Assignments      []taskAssignmentView `json:"assignments"`
	InsertedAt       string               `json:"inserted_at"`
	UpdatedAt        string               `json:"updated_at"`
	History          *[]store.TaskEvent   `json:"history,omitempty"` // a pointer: with include=history, [] is shown
	HistoryTruncated *bool                `json:"history_truncated,omitempty"`
}

// taskAssignmentView is TaskAssignment.
type taskAssignmentView struct {
	Assignee       store.ActorRef `json:"assignee"`
	Status         string         `json:"status"`
	ActiveForm     string         `json:"active_form"`
	LinkedNativeID string         `json:"linked_native_id"`
	UpdatedAt      string         `json:"updated_at"`
}

func newTaskView(t *store.Task, withHistory bool) taskView {
	v := taskView{
		ID: t.ID, Number: t.Number, ChatRoomID: t.RoomID, Subject: t.Subject, Detail: t.Detail, State: t.State,
		OverallStatus: t.OverallStatus(), SupersededByID: t.SupersededByID, CreatedBy: t.CreatedBy,
		Assignments: make([]taskAssignmentView, len(t.Assignments)),
		InsertedAt:  timestamp(t.InsertedAt), UpdatedAt: timestamp(t.UpdatedAt),
	}
	for i, a := range t.Assignments {
		v.Assignments[i] = taskAssignmentView{Assignee: a.Assignee, Status: a.Status, ActiveForm: a.ActiveForm,
			LinkedNativeID: a.LinkedNativeID, UpdatedAt: timestamp(a.UpdatedAt)}
	}
	if withHistory {
		v.History, v.HistoryTruncated = shownHistory(t.History), &t.HistoryTruncated
	}
	return v
}

var (
	taskListing        = listing{defaultLimit: 50, maxLimit: 100}
	taskHistoryListing = listing{defaultLimit: 50, maxLimit: 100}
)

// listTasks is GET /agent/chats/{id}/tasks?state= (and the same under
// /me): the board by number, active tasks unless another state (or all) is
// asked for.
func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p := store.Problems{}
	state := enumParam(q, "state", "active", append(append([]string{}, store.TaskStates...), "all"), p)
	if err := p.Err(store.CodeValidation); err != nil {
		return err
	}
	roomID := r.PathValue("chat_id")
	// The state is part of the scope: a cursor pages the listing it came from.
	scope := "agent/tasks:" + roomID + ":" + state
	if !principal(r).IsAgent() {
		scope = "me/tasks:" + roomID + ":" + state
	}
	pq, err := s.parsePage(q, scope, taskListing)
	if err != nil {
		return err
	}
	filter := state
	if filter == "all" {
		filter = ""
	}
	page, err := s.db.ListTasks(r.Context(), principal(r).Actor(), roomID, filter, pq.PageRequest)
	if err != nil {
		return err
	}
	views := viewsOf(page.Items, func(t *store.Task) taskView { return newTaskView(t, false) })
	return replyPage(w, views, s.meta(w, pq, scope, page.PageInfo))
}

type createTaskRequest struct {
	Subject      *string `json:"subject"`
	Detail       *string `json:"detail"`
	SupersedesID *string `json:"supersedes_id"`
}

// createTask is POST /agent/chats/{id}/tasks.
func (s *Server) createTask(w http.ResponseWriter, r *http.Request, req createTaskRequest) error {
	t, err := s.db.CreateTask(r.Context(), principal(r).Actor(), r.PathValue("chat_id"),
		store.NewTask{Subject: req.Subject, Detail: req.Detail, SupersedesID: req.SupersedesID})
	if err != nil {
		return err
	}
	return reply(w, http.StatusCreated, newTaskView(t, false))
}

// getTask is GET /agent/chats/{id}/tasks/{task}[?include=history].
func (s *Server) getTask(w http.ResponseWriter, r *http.Request) error {
	withHistory, err := includeHistory(r.URL.Query())
	if err != nil {
		return err
	}
	t, err := s.db.Task(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), r.PathValue("id"), withHistory)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newTaskView(t, withHistory))
}

type updateTaskRequest struct {
	Status         *string `json:"status"`
	ActiveForm     *string `json:"active_form"`
	LinkedNativeID *string `json:"linked_native_id" chatd:"verbatim"` // the agent's own task id
	Comment        *string `json:"comment"`
	Subject        *string `json:"subject"`
	Detail         *string `json:"detail"`
	State          *string `json:"state"`
}

// updateTask is POST /agent/chats/{id}/tasks/{task}: the caller's work,
// a comment, edits and lifecycle, in one call (POST, as the API has it).
func (s *Server) updateTask(w http.ResponseWriter, r *http.Request, req updateTaskRequest) error {
	t, err := s.db.UpdateTask(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), r.PathValue("id"), store.TaskUpdate{
		Status: req.Status, ActiveForm: req.ActiveForm, LinkedNativeID: req.LinkedNativeID, Comment: req.Comment,
		Subject: req.Subject, Detail: req.Detail, State: req.State,
	})
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newTaskView(t, false))
}

// listTaskHistory is GET /agent/chats/{id}/tasks/{task}/history: the whole
// ledger, oldest first.
func (s *Server) listTaskHistory(w http.ResponseWriter, r *http.Request) error {
	roomID, ref := r.PathValue("chat_id"), r.PathValue("id")
	// The task as the path names it (id or number) scopes the cursor.
	scope := "agent/task_history:" + roomID + ":" + ref
	pq, err := s.parsePage(r.URL.Query(), scope, taskHistoryListing)
	if err != nil {
		return err
	}
	page, err := s.db.TaskHistory(r.Context(), principal(r).Actor(), roomID, ref, pq.PageRequest)
	if err != nil {
		return err
	}
	return replyPage(w, page.Items, s.meta(w, pq, scope, page.PageInfo))
}

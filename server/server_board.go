package server

import (
	"net/http"

	"github.com/chatd/chatd/store"
)

// What a room is working towards and who is working in it right now: the
// goal (board) with its audit trail, and the agents' activity reports.

func (s *Server) boardRoutes() {
	s.handle("POST", "/api/v1/agent/chats/:chat_id/activity", agentsOnly, withBody(s, s.reportActivity))
	s.handle("GET", "/api/v1/agent/chats/:chat_id/board", agentsOnly, s.getBoard)
	s.handle("PUT", "/api/v1/agent/chats/:chat_id/board", agentsOnly, withBody(s, s.putBoard))

	s.handle("GET", "/api/v1/me/chats/:chat_id/board", humansOnly, s.getBoard)
	s.handle("PUT", "/api/v1/me/chats/:chat_id/board", humansOnly, withBody(s, s.putBoard))
}

type activityRequest struct {
	Working *bool `json:"working" chatd:"required"`
}

// reportActivity is POST /agent/chats/{id}/activity: the agent says it is
// working (re-sent every few seconds; it lapses after activityTTL) or done.
// Room readers see it as "working" on the agent's participant entry.
func (s *Server) reportActivity(w http.ResponseWriter, r *http.Request, req activityRequest) error {
	agent := callerAgent(r)
	roomID := r.PathValue("chat_id")
	if _, err := s.db.Room(r.Context(), store.AgentActor(agent), roomID); err != nil {
		return err
	}
	s.activity.set(roomID, agent.ID, *req.Working)
	return reply(w, http.StatusOK, map[string]bool{"working": *req.Working})
}

// boardView is Board.
type boardView struct {
	ChatRoomID       string              `json:"chat_room_id"`
	GoalTitle        *string             `json:"goal_title"`
	GoalSummary      *string             `json:"goal_summary"`
	CreatedBy        *store.ActorRef     `json:"created_by"`
	UpdatedBy        *store.ActorRef     `json:"updated_by"`
	InsertedAt       *string             `json:"inserted_at"`
	UpdatedAt        *string             `json:"updated_at"`
	History          *[]store.BoardEvent `json:"history,omitempty"` // a pointer: with include=history, [] is shown
	HistoryTruncated *bool               `json:"history_truncated,omitempty"`
}

func newBoardView(b *store.Board, withHistory bool) boardView {
	v := boardView{ChatRoomID: b.RoomID, GoalTitle: b.GoalTitle, GoalSummary: b.GoalSummary, CreatedBy: b.CreatedBy, UpdatedBy: b.UpdatedBy}
	if b.InsertedAt != nil {
		t, u := timestamp(*b.InsertedAt), timestamp(*b.UpdatedAt)
		v.InsertedAt, v.UpdatedAt = &t, &u
	}
	if withHistory {
		v.History, v.HistoryTruncated = shownHistory(b.History), &b.HistoryTruncated
	}
	return v
}

// getBoard is GET .../chats/{id}/board[?include=history].
func (s *Server) getBoard(w http.ResponseWriter, r *http.Request) error {
	withHistory, err := includeHistory(r.URL.Query())
	if err != nil {
		return err
	}
	b, err := s.db.Board(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), withHistory)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newBoardView(b, withHistory))
}

type putBoardRequest struct {
	GoalTitle   *string `json:"goal_title"`
	GoalSummary *string `json:"goal_summary"`
}

// putBoard is PUT .../chats/{id}/board: only the fields sent change.
func (s *Server) putBoard(w http.ResponseWriter, r *http.Request, req putBoardRequest) error {
	b, err := s.db.UpdateBoard(r.Context(), principal(r).Actor(), r.PathValue("chat_id"),
		store.BoardUpdate{GoalTitle: req.GoalTitle, GoalSummary: req.GoalSummary})
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newBoardView(b, false))
}

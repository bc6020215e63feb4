package server

import (
	"net/http"

	"github.com/chatd/chatd/store"
)

// Retention and storage, chatd's own: how long an organization's rooms keep
// their text messages, events and files (its admins set it; everyone in it
// reads it), a room's own shorter periods (its owner sets them), and what
// the database holds, for the organization's admins. The purge that
// applies the periods runs in the background (store/purge.go).

func (s *Server) retentionRoutes() {
	s.handle("GET", "/api/v1/me/organization/retention", humansOnly, s.getOrganizationRetention)
	s.handle("PUT", "/api/v1/me/organization/retention", humansOnly, withBody(s, s.putOrganizationRetention))
	s.handle("GET", "/api/v1/me/organization/stats", humansOnly, s.getOrganizationStats)
	s.handle("GET", "/api/v1/me/chats/:chat_id/retention", humansOnly, s.getRoomRetention)
	s.handle("PUT", "/api/v1/me/chats/:chat_id/retention", humansOnly, withBody(s, s.putRoomRetention))
}

// periodsView is a setting's days of each kind; null keeps forever (an
// organization's) or follows the organization (a room's).
type periodsView struct {
	TextDays  *int `json:"text_days"`
	EventDays *int `json:"event_days"`
	FileDays  *int `json:"file_days"`
}

func newPeriodsView(p store.Periods) periodsView {
	return periodsView{p.TextDays, p.EventDays, p.FileDays}
}

// retentionView is an organization's retention.
type retentionView struct {
	periodsView
	UpdatedAt *string `json:"updated_at"`
}

func newRetentionView(r *store.Retention) retentionView {
	return retentionView{newPeriodsView(r.Periods), optionalTimestamp(r.UpdatedAt)}
}

// roomRetentionView is a room's retention, with what applies in it.
type roomRetentionView struct {
	retentionView
	Organization periodsView `json:"organization"`
	Effective    periodsView `json:"effective"`
}

func newRoomRetentionView(r *store.RoomRetention) roomRetentionView {
	return roomRetentionView{newRetentionView(&r.Retention), newPeriodsView(r.Organization), newPeriodsView(r.Effective)}
}

// retentionRequest replaces a setting whole: a kind left out is null.
type retentionRequest struct {
	Retention *periodsView `json:"retention" chatd:"required"`
}

func (req retentionRequest) periods() store.Periods {
	return store.Periods{TextDays: req.Retention.TextDays, EventDays: req.Retention.EventDays, FileDays: req.Retention.FileDays}
}

func (s *Server) getOrganizationRetention(w http.ResponseWriter, r *http.Request) error {
	ret, err := s.db.OrganizationRetention(r.Context(), callerUser(r))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newRetentionView(ret))
}

func (s *Server) putOrganizationRetention(w http.ResponseWriter, r *http.Request, req retentionRequest) error {
	ret, err := s.db.SetOrganizationRetention(r.Context(), callerUser(r), req.periods())
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newRetentionView(ret))
}

func (s *Server) getRoomRetention(w http.ResponseWriter, r *http.Request) error {
	ret, err := s.db.RoomRetention(r.Context(), principal(r).Actor(), r.PathValue("chat_id"))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newRoomRetentionView(ret))
}

func (s *Server) putRoomRetention(w http.ResponseWriter, r *http.Request, req retentionRequest) error {
	ret, err := s.db.SetRoomRetention(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), req.periods())
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newRoomRetentionView(ret))
}

// statsView is GET /me/organization/stats: the database's figures (the
// whole server's: no names, no content) and the organization's rooms and
// messages.
type statsView struct {
	Database     databaseStatsView     `json:"database"`
	Organization organizationStatsView `json:"organization"`
}

type databaseStatsView struct {
	Bytes     int64            `json:"bytes"`
	WALBytes  int64            `json:"wal_bytes"`
	FreeBytes int64            `json:"free_bytes"`
	Tables    map[string]int64 `json:"tables"`
	Purged    purgedView       `json:"purged"`
}

type organizationStatsView struct {
	Rooms             int64          `json:"rooms"`
	Messages          int64          `json:"messages"`
	Files             int64          `json:"files"`
	FileBytes         int64          `json:"file_bytes"`
	LargestByMessages []roomSizeView `json:"largest_rooms_by_messages"`
	LargestByBytes    []roomSizeView `json:"largest_rooms_by_bytes"`
	MessagesPerDay    []dayCountView `json:"messages_per_day"`
	Retention         retentionView  `json:"retention"`
}

type roomSizeView struct {
	ID           string  `json:"id"`
	Title        *string `json:"title"`
	Readable     bool    `json:"readable"`
	Deleted      bool    `json:"deleted"`
	Messages     int64   `json:"messages"`
	MessageBytes int64   `json:"message_bytes"`
	FileBytes    int64   `json:"file_bytes"`
}

type dayCountView struct {
	Day    string `json:"day"`
	Texts  int64  `json:"texts"`
	Events int64  `json:"events"`
}

// purgedView is what this server's purge deleted since it started, in every
// organization.
type purgedView struct {
	Texts  int64 `json:"texts"`
	Events int64 `json:"events"`
	Files  int64 `json:"files"`
	Bytes  int64 `json:"bytes"`
}

func (s *Server) getOrganizationStats(w http.ResponseWriter, r *http.Request) error {
	user := callerUser(r)
	st, err := s.db.OrganizationStats(r.Context(), user)
	if err != nil {
		return err
	}
	ret, err := s.db.OrganizationRetention(r.Context(), user)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newStatsView(st, ret, s.db.PurgeStats()))
}

func newStatsView(st *store.Stats, ret *store.Retention, purged store.PurgeStats) statsView {
	tables := map[string]int64{}
	for _, t := range st.Tables {
		tables[t.Name] = t.Rows
	}
	days := make([]dayCountView, len(st.Days))
	for i, d := range st.Days {
		days[i] = dayCountView{d.Day, d.Texts, d.Events}
	}
	return statsView{
		Database: databaseStatsView{Bytes: st.DatabaseBytes, WALBytes: st.WALBytes, FreeBytes: st.FreeBytes, Tables: tables,
			Purged: purgedView{purged.Texts, purged.Events, purged.Files, purged.Bytes}},
		Organization: organizationStatsView{Rooms: st.Rooms, Messages: st.Messages, Files: st.Files, FileBytes: st.FileBytes,
			LargestByMessages: roomSizeViews(st.LargestByMessages), LargestByBytes: roomSizeViews(st.LargestByBytes),
			MessagesPerDay: days, Retention: newRetentionView(ret)},
	}
}

func roomSizeViews(rooms []store.RoomSize) []roomSizeView {
	out := make([]roomSizeView, len(rooms))
	for i, r := range rooms {
		out[i] = roomSizeView{r.ID, r.Title, r.Readable, r.Deleted, r.Messages, r.MessageBytes, r.FileBytes}
	}
	return out
}

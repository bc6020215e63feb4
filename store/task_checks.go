package store

// What a client sends to create or update a task, and its checks:
// everything that needs no database (the lifecycle rules, which need the
// task, are canChangeState and notActive in tasks.go).

// TaskStateChanges are the states an update may ask for.
var TaskStateChanges = []string{"cancelled", "archived", "active"}

// The bounds of a task's texts.
const (
	maxTaskSubjectLen    = 200
	maxTaskDetailLen     = 8000
	maxTaskActiveFormLen = 200
	maxTaskLinkLen       = 200
	maxTaskCommentLen    = 4000
)

// NewTask is what CreateTask takes; Subject is required.
type NewTask struct {
	Subject      *string
	Detail       *string
	SupersedesID *string // id or board number of an active task this one replaces
}

// taskRow is a NewTask checked for everything that needs no database.
type taskRow struct {
	subject, detail string
}

// notSupersedable refuses a supersedes_id, whether it reads as no task
// reference at all or names no task of the room.
const notSupersedable = "must be the id or board number of an active task of this room"

// check validates nt and returns its texts trimmed.
func (nt NewTask) check() (taskRow, error) {
	p := Problems{}
	var row taskRow
	if nt.Subject == nil {
		p.Add("/subject", "is required")
	} else if s, msg := cleanText(*nt.Subject, 1, maxTaskSubjectLen); msg != "" {
		p.Add("/subject", "%s", msg)
	} else {
		row.subject = s
	}
	if nt.Detail != nil {
		d, msg := cleanMultiline(*nt.Detail, maxTaskDetailLen)
		if msg != "" {
			p.Add("/detail", "%s", msg)
		}
		row.detail = d
	}
	if nt.SupersedesID != nil {
		if _, _, ok := parseTaskRef(*nt.SupersedesID); !ok {
			p.Add("/supersedes_id", "%s", notSupersedable)
		}
	}
	return row, p.Err(CodeValidation)
}

// TaskUpdate holds what UpdateTask applies; nil leaves a field alone.
// Status, ActiveForm and LinkedNativeID are the caller's own assignment.
type TaskUpdate struct {
	Status         *string
	ActiveForm     *string
	LinkedNativeID *string
	Comment        *string
	Subject        *string
	Detail         *string
	State          *string // cancelled, archived, or active (un-archive)
}

func (u TaskUpdate) hasWork() bool {
	return u.Status != nil || u.ActiveForm != nil || u.LinkedNativeID != nil || u.Comment != nil || u.Subject != nil || u.Detail != nil
}

// clean validates u and returns it with its texts trimmed.
func (u TaskUpdate) clean() (TaskUpdate, error) {
	p := Problems{}
	if !u.hasWork() && u.State == nil {
		p.Add("", "send at least one of status, active_form, linked_native_id, comment, subject, detail or state")
	}
	if u.Status != nil {
		checkOneOf(p, "/status", *u.Status, TaskStatuses)
	}
	if u.State != nil {
		checkOneOf(p, "/state", *u.State, TaskStateChanges)
	}
	text := func(ptr string, v **string, clean func(string) (string, string)) {
		if *v == nil {
			return
		}
		s, msg := clean(**v)
		if msg != "" {
			p.Add(ptr, "%s", msg)
		}
		*v = &s
	}
	text("/active_form", &u.ActiveForm, func(s string) (string, string) { return cleanText(s, 0, maxTaskActiveFormLen) })
	text("/linked_native_id", &u.LinkedNativeID, func(s string) (string, string) { return cleanText(s, 0, maxTaskLinkLen) })
	text("/subject", &u.Subject, func(s string) (string, string) { return cleanText(s, 1, maxTaskSubjectLen) })
	text("/detail", &u.Detail, func(s string) (string, string) { return cleanMultiline(s, maxTaskDetailLen) })
	text("/comment", &u.Comment, func(s string) (string, string) {
		s, msg := cleanMultiline(s, maxTaskCommentLen)
		if msg == "" && s == "" {
			msg = "can't be blank"
		}
		return s, msg
	})
	return u, p.Err(CodeValidation)
}

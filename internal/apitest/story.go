package apitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// An error envelope tells one story: its message describes the problem its
// code names. A refusal whose code says one thing while its message (or the
// problem its message leads with) says another misleads whoever reads
// either, so CheckStory is run on every refusal a test sees.

// story is what a code's problem concerns: the pointer of the problem the
// message must lead with (when the envelope has pointer details), and words
// of which the message must hold at least one (case-insensitive).
type story struct {
	lead  *regexp.Regexp
	words []string
}

func ptr(expr string) *regexp.Regexp { return regexp.MustCompile(expr) }

// stories maps each refinement code (the codes that say more than their
// status) to its story. Generic codes (validation_error, not_found,
// forbidden, ...) have none: any problem may stand behind them.
var stories = map[string]story{
	"mentions_required":                 {ptr(`^/message/mentions$`), []string{"mention"}},
	"cannot_mention_self":               {ptr(`^/message/mentions/\d+$`), []string{"sender"}},
	"duplicate_mentions":                {ptr(`^/message/mentions/\d+$`), []string{"same participant"}},
	"mentioned_participant_not_in_room": {ptr(`^/message/mentions/\d+/id$`), []string{"participant"}},
	"invalid_mention_kind":              {ptr(`^/message/mentions/\d+/kind$`), []string{"mention or reference"}},
	"handle_not_found":                  {ptr(`^/message/mentions/\d+/handle$`), []string{"participant"}},
	"mention_missing_identifier":        {ptr(`^/message/mentions/\d+$`), []string{"id or a handle"}},
	"unknown_attachment":                {ptr(`^/message/attachment_ids/\d+$`), []string{"file"}},
	"no_active_attempt":                 {nil, []string{"attempt"}},
	"execution_history_exists":          {ptr(`^/force$`), []string{"force"}},
	"execution_stopped":                 {nil, []string{"stopped"}},
	"cannot_remove_sole_owner":          {nil, []string{"owner"}},
	"limit_reached":                     {nil, []string{"limit"}},
	"invalid_cursor":                    {ptr(`^/cursor$`), []string{"cursor"}},
	"unknown_field":                     {nil, []string{"unknown field"}},
	"invalid_json":                      {nil, []string{"JSON"}},
	"payload_too_large":                 {nil, []string{"larger than"}},
	"conflicting_credentials":           {nil, []string{"not both"}},
	"method_not_allowed":                {nil, []string{"not allowed"}},
	"range_not_satisfiable":             {nil, []string{"range"}},
	"feature_disabled":                  {nil, []string{"switched off"}},
	"invalid_on_conflict":               {nil, []string{"on_conflict"}},
	"connection_conflict":               {nil, []string{"already has a connection"}},
	"rate_limited":                      {nil, []string{"too many"}},
	"too_many_requests":                 {nil, []string{"too many"}},
	"delete_failed":                     {nil, []string{"failed"}},
}

var andMore = regexp.MustCompile(`\(and (\d+) more\)$`)

// CheckStory checks the error envelope of a refusal with the given status:
//
//   - When details map JSON Pointers to messages, the message leads with one
//     of them: it starts with the pointer and its first message (for a 422,
//     whose details say what to fix, always; for other statuses it may
//     instead name the pointer's field and hold its message, as "handle bob
//     is already taken" does for /handle). A closing "(and N more)" counts
//     the other pointers.
//   - For a code in the stories table, the problem the message leads with
//     is one of the code's, and the message holds one of its words.
//
// A body that is not an error envelope is left to the schema checks.
func CheckStory(status int, body []byte) error {
	var env struct {
		Error *struct {
			Code    string          `json:"code"`
			Message string          `json:"message"`
			Details json.RawMessage `json:"details"`
		} `json:"error"`
	}
	if status < 400 || json.Unmarshal(body, &env) != nil || env.Error == nil {
		return nil
	}
	e := env.Error
	var problems map[string][]string
	if len(e.Details) > 0 && (json.Unmarshal(e.Details, &problems) != nil || !allPointers(problems)) {
		problems = nil // details of another shape (a quota's figures, what a delegation grants, ...)
	}
	lead := ""
	if len(problems) > 0 {
		var err error
		if lead, err = leadProblem(status, e.Message, problems); err != nil {
			return fmt.Errorf("%s: %w (details %s)", e.Code, err, e.Details)
		}
	}
	s, ok := stories[e.Code]
	if !ok {
		return nil
	}
	if s.lead != nil && len(problems) > 0 && !s.lead.MatchString(lead) {
		return fmt.Errorf("%s: the message %q leads with the problem at %q, which is not the code's (%s); details %s",
			e.Code, e.Message, lead, s.lead, e.Details)
	}
	msg := strings.ToLower(e.Message)
	for _, w := range s.words {
		if strings.Contains(msg, strings.ToLower(w)) {
			return nil
		}
	}
	return fmt.Errorf("%s: the message %q says nothing of the code's problem (%q)", e.Code, e.Message, s.words)
}

// leadProblem returns the pointer of the problem the message leads with.
func leadProblem(status int, message string, problems map[string][]string) (string, error) {
	pointers := make([]string, 0, len(problems))
	for p := range problems {
		pointers = append(pointers, p)
	}
	sort.Strings(pointers)
	if m := andMore.FindStringSubmatch(message); m != nil {
		if n, _ := strconv.Atoi(m[1]); n != len(problems)-1 {
			return "", fmt.Errorf("the message %q counts %d more problems, the details hold %d", message, n, len(problems)-1)
		}
	}
	for _, p := range pointers {
		if len(problems[p]) > 0 && strings.HasPrefix(message, strings.TrimSpace(p+" "+problems[p][0])) {
			return p, nil
		}
	}
	if status != http.StatusUnprocessableEntity {
		for _, p := range pointers {
			if len(problems[p]) > 0 && strings.Contains(message, problems[p][0]) && strings.Contains(message, fieldOf(p)) {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("the message %q does not lead with any problem of its details", message)
}

// allPointers reports whether every key of problems is a JSON Pointer.
func allPointers(problems map[string][]string) bool {
	for p := range problems {
		if p != "" && !strings.HasPrefix(p, "/") {
			return false
		}
	}
	return true
}

// fieldOf is the last segment of a pointer that names a field (not an
// array index), as a message would name it.
func fieldOf(pointer string) string {
	segs := strings.Split(pointer, "/")
	for i := len(segs) - 1; i >= 0; i-- {
		if _, err := strconv.Atoi(segs[i]); err != nil && segs[i] != "" {
			return strings.NewReplacer("~1", "/", "~0", "~").Replace(segs[i])
		}
	}
	return ""
}

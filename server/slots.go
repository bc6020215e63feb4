package server

// slots counts what credentials hold open (sockets and MCP sessions,
// long-polls) against two bounds: one in all, one per credential. Its
// owner locks it.
type slots struct {
	total  int
	perKey map[string]int
}

func newSlots() slots { return slots{perKey: map[string]int{}} }

// take counts one more for the credential limitKey, unless that would pass
// maxTotal in all or maxPerKey for it.
func (s *slots) take(limitKey string, maxTotal, maxPerKey int) bool {
	if s.total >= maxTotal || s.perKey[limitKey] >= maxPerKey {
		return false
	}
	s.total++
	s.perKey[limitKey]++
	return true
}

// give gives back one the credential limitKey held.
func (s *slots) give(limitKey string) {
	s.total--
	if s.perKey[limitKey]--; s.perKey[limitKey] <= 0 {
		delete(s.perKey, limitKey)
	}
}

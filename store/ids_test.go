package store

import "testing"

func TestNormalizeIDLowersOnlyTheCanonicalForm(t *testing.T) {
	const id = "0190a000-00ab-7000-8cde-00000000000f"
	for _, tc := range []struct{ in, want string }{
		{id, id},
		{"0190A000-00AB-7000-8CDE-00000000000F", id},
		{"0190a000-00Ab-7000-8cDe-00000000000F", id},
		{"{0190A000-00AB-7000-8CDE-00000000000F}", "{0190A000-00AB-7000-8CDE-00000000000F}"},
		{"urn:uuid:0190A000-00AB-7000-8CDE-00000000000F", "urn:uuid:0190A000-00AB-7000-8CDE-00000000000F"},
		{"0190A00000AB70008CDE00000000000F", "0190A00000AB70008CDE00000000000F"},
		{"0190A000-00AB-7000-8CDE-00000000000G", "0190A000-00AB-7000-8CDE-00000000000G"},
		{"0190A000_00AB-7000-8CDE-00000000000F", "0190A000_00AB-7000-8CDE-00000000000F"},
		{"HELLO", "HELLO"},
		{"", ""},
	} {
		if got := NormalizeID(tc.in); got != tc.want {
			t.Errorf("NormalizeID(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if ValidID(NormalizeID(tc.in)) != (NormalizeID(tc.in) == id) {
			t.Errorf("ValidID(NormalizeID(%q)) = %v", tc.in, !ValidID(NormalizeID(tc.in)))
		}
	}
}

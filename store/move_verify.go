package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
)

// A move is checked table by table: the rows read from SQLite and those
// read back from PostgreSQL, inside the move's transaction, must be as
// many and have the same checksum, computed over values put in one
// canonical form whichever database and driver read them.

// verify reads the table back from PostgreSQL, inside the move's
// transaction, and compares its rows with SQLite's: their number and
// their checksum, summed the same way.
func (m *mover) verify(ctx context.Context, pg *pgx.Conn, t *moveTable) error {
	names := make([]string, len(t.columns))
	for i, c := range t.columns {
		names[i] = c.name
	}
	rows, err := pg.Query(ctx, "SELECT "+quotedList(names)+" FROM "+quoteName(t.name))
	if err != nil {
		return err
	}
	defer rows.Close()
	var n int64
	var sum rowSum
	for rows.Next() {
		values, err := rows.Values()
		if err != nil {
			return err
		}
		sum.add(values)
		if n++; n%MoveProgressRows == 0 {
			m.progress(MoveProgress{Stage: "verify", Table: t.name, Rows: n})
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n != t.rows || sum != t.sum {
		return fmt.Errorf("the copy of %s differs: SQLite has %d rows (checksum %s), PostgreSQL %d (checksum %s)",
			t.name, t.rows, t.sum, n, sum)
	}
	m.progress(MoveProgress{Stage: "verify", Table: t.name, Rows: n, Done: true})
	return nil
}

// rowSum is an order-independent checksum of a table's rows: the sum, in
// two 64-bit lanes, of each row's SHA-256 over its canonical values. A
// sum (rather than a xor) keeps two equal rows from cancelling out.
type rowSum [2]uint64

func (s *rowSum) add(values []any) {
	h := sha256.New()
	var buf []byte
	for _, v := range values {
		buf = appendCanonical(buf[:0], v)
		h.Write(buf)
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	s[0] += binary.BigEndian.Uint64(d[0:8])
	s[1] += binary.BigEndian.Uint64(d[8:16])
}

func (s rowSum) String() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[0:8], s[0])
	binary.BigEndian.PutUint64(b[8:16], s[1])
	return hex.EncodeToString(b[:])
}

// appendCanonical appends v's canonical form, the same whichever database
// and driver read it: a tag for its kind, then the value. Text and bytes
// share a tag, since a TEXT column of one may be the other's bytes.
func appendCanonical(buf []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(buf, 'n')
	case int64:
		return binary.BigEndian.AppendUint64(append(buf, 'i'), uint64(x))
	case int32:
		return binary.BigEndian.AppendUint64(append(buf, 'i'), uint64(int64(x)))
	case int16:
		return binary.BigEndian.AppendUint64(append(buf, 'i'), uint64(int64(x)))
	case float64:
		return binary.BigEndian.AppendUint64(append(buf, 'f'), math.Float64bits(x))
	case float32:
		return binary.BigEndian.AppendUint64(append(buf, 'f'), math.Float64bits(float64(x)))
	case bool:
		n := int64(0)
		if x {
			n = 1
		}
		return binary.BigEndian.AppendUint64(append(buf, 'i'), uint64(n))
	case string:
		return append(binary.AppendUvarint(append(buf, 's'), uint64(len(x))), x...)
	case []byte:
		return append(binary.AppendUvarint(append(buf, 's'), uint64(len(x))), x...)
	default:
		s := fmt.Sprintf("%T:%v", v, v)
		return append(binary.AppendUvarint(append(buf, '?'), uint64(len(s))), s...)
	}
}

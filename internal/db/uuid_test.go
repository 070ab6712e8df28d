package db

import (
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"
)

func TestRegisterUUIDEncodes(t *testing.T) {
	t.Parallel()
	m := pgtype.NewMap()
	registerUUID(m)
	u := uuid.Must(uuid.NewV7())
	for _, format := range []int16{pgtype.BinaryFormatCode, pgtype.TextFormatCode} {
		want, err := pgtype.NewMap().Encode(pgtype.UUIDOID, format, u, nil)
		require.NoError(t, err)
		got, err := m.Encode(pgtype.UUIDOID, format, u, nil)
		require.NoError(t, err)
		require.Equal(t, want, got, "format %d", format)
		got, err = m.Encode(pgtype.UUIDOID, format, uuid.NullUUID{UUID: u, Valid: true}, nil)
		require.NoError(t, err)
		require.Equal(t, want, got, "format %d", format)
		got, err = m.Encode(pgtype.UUIDOID, format, uuid.NullUUID{}, nil)
		require.NoError(t, err)
		require.Nil(t, got, "a null uuid encodes as NULL")
		p := &u
		got, err = m.Encode(pgtype.UUIDOID, format, p, nil)
		require.NoError(t, err)
		require.Equal(t, want, got, "format %d", format)
	}
	require.Equal(t, u[:], must(m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, u, nil)))
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkEncodeUUID is the cost of one uuid query parameter, as pgx sees google/uuid without
// and with registerUUID.
func BenchmarkEncodeUUID(b *testing.B) {
	u := uuid.Must(uuid.NewV7())
	for _, bc := range []struct {
		name string
		m    *pgtype.Map
	}{{"pgx-default", pgtype.NewMap()}, {"registered", func() *pgtype.Map { m := pgtype.NewMap(); registerUUID(m); return m }()}} {
		b.Run(bc.name, func(b *testing.B) {
			buf := make([]byte, 0, 64)
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if _, err = bc.m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, u, buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package db

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// registerUUID makes m encode google/uuid values (uuid.UUID, uuid.NullUUID) straight into
// Postgres uuids. pgx does not know the type: it would go through driver.Valuer (a string),
// fail the binary plan (building an error with fmt.Errorf), parse the string back and encode
// that, for every uuid parameter of every query: about a tenth of a worker's CPU in agentry
// bench (see docs/PERFORMANCE.md).
func registerUUID(m *pgtype.Map) {
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapUUIDEncodePlan}, m.TryWrapEncodePlanFuncs...)
}

func tryWrapUUIDEncodePlan(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	switch v := value.(type) {
	case uuid.UUID:
		return &uuidEncodePlan{}, pgtype.UUID{Bytes: v, Valid: true}, true
	case uuid.NullUUID:
		return &nullUUIDEncodePlan{}, pgtype.UUID{Bytes: v.UUID, Valid: v.Valid}, true
	}
	return nil, nil, false
}

type uuidEncodePlan struct{ next pgtype.EncodePlan }

func (p *uuidEncodePlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *uuidEncodePlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode(pgtype.UUID{Bytes: value.(uuid.UUID), Valid: true}, buf)
}

type nullUUIDEncodePlan struct{ next pgtype.EncodePlan }

func (p *nullUUIDEncodePlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *nullUUIDEncodePlan) Encode(value any, buf []byte) ([]byte, error) {
	v := value.(uuid.NullUUID)
	return p.next.Encode(pgtype.UUID{Bytes: v.UUID, Valid: v.Valid}, buf)
}

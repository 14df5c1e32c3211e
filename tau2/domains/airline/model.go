// Package airline is τ²'s airline domain (src/tau2/domains/airline): the
// FlightDB data model and the 14 AirlineTools with τ²'s exact semantics and
// quirks (see docs/TAU2.md §2.1 and §9.5). It registers itself as
// "airline".
package airline

import (
	"fmt"
	"strings"

	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
)

// Cabin classes, flight types and insurance values (τ² Literals).
var (
	cabinClasses = []string{"business", "economy", "basic_economy"}
	flightTypes  = []string{"round_trip", "one_way"}
	insurances   = []string{"yes", "no"}
	memberships  = []string{"gold", "silver", "regular"}
)

// literalMsg renders pydantic's literal_error message: "Input should be
// 'a', 'b' or 'c'".
func literalMsg(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = "'" + v + "'"
	}
	if len(q) == 1 {
		return "Input should be " + q[0]
	}
	return "Input should be " + strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

func checkLiteral(model, field string, v any, values []string) error {
	if s, ok := v.(string); ok {
		for _, x := range values {
			if s == x {
				return nil
			}
		}
	}
	return pyjson.NewValidationError(model, []any{field}, literalMsg(values), "literal_error", v)
}

// Name is a person's name.
type Name struct {
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
}

// Address is a user's address.
type Address struct {
	Address1 string  `json:"address1"`
	Address2 *string `json:"address2" pydantic:"optional"`
	City     string  `json:"city"`
	Country  string  `json:"country"`
	State    string  `json:"state"`
	Zip      string  `json:"zip"`
}

// Payment is a payment (or, with a negative amount, a refund) of a
// reservation.
type Payment struct {
	PaymentID string `json:"payment_id"`
	Amount    int64  `json:"amount"`
}

// PaymentMethod is the union CreditCard | GiftCard | Certificate,
// discriminated by Source. Credit cards use Brand and LastFour; gift cards
// and certificates use Amount (a Python float).
type PaymentMethod struct {
	Source   string
	ID       string
	Brand    string
	LastFour string
	Amount   float64
}

// Payment method sources.
const (
	SourceCreditCard  = "credit_card"
	SourceGiftCard    = "gift_card"
	SourceCertificate = "certificate"
)

// MarshalPy dumps the variant in pydantic field order (source, id, then the
// variant's fields).
func (p *PaymentMethod) MarshalPy() (any, error) {
	switch p.Source {
	case SourceCreditCard:
		return pyjson.NewObject("source", p.Source, "id", p.ID, "brand", p.Brand, "last_four", p.LastFour), nil
	case SourceGiftCard, SourceCertificate:
		return pyjson.NewObject("source", p.Source, "id", p.ID, "amount", p.Amount), nil
	}
	return nil, fmt.Errorf("airline: unknown payment method source %q", p.Source)
}

type creditCard struct {
	Source   string `json:"source"`
	ID       string `json:"id"`
	Brand    string `json:"brand"`
	LastFour string `json:"last_four"`
}

type balanceMethod struct {
	Source string  `json:"source"`
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
}

// UnmarshalPy validates one of the three variants by its source.
func (p *PaymentMethod) UnmarshalPy(v any) error {
	o, ok := v.(*pyjson.Object)
	if !ok {
		return pyjson.NewValidationError("", nil, "Input should be a valid dictionary or instance of CreditCard", "model_type", v)
	}
	src, _ := o.Get("source")
	switch src {
	case SourceCreditCard:
		var c creditCard
		if err := pyjson.FromValue(v, &c); err != nil {
			return err
		}
		*p = PaymentMethod{Source: c.Source, ID: c.ID, Brand: c.Brand, LastFour: c.LastFour}
	case SourceGiftCard, SourceCertificate:
		var b balanceMethod
		if err := pyjson.FromValue(v, &b); err != nil {
			return err
		}
		*p = PaymentMethod{Source: b.Source, ID: b.ID, Amount: b.Amount}
	default:
		return pyjson.NewValidationError("", []any{"source"}, literalMsg([]string{SourceCreditCard, SourceGiftCard, SourceCertificate}), "literal_error", src)
	}
	return nil
}

// Passenger is a traveller.
type Passenger struct {
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
	Dob       string `json:"dob"`
}

// Flight date statuses.
const (
	StatusAvailable = "available"
	StatusLanded    = "landed"
	StatusCancelled = "cancelled"
	StatusDelayed   = "delayed"
	StatusFlying    = "flying"
	StatusOnTime    = "on time"
)

// FlightDate is the union FlightDateStatus, discriminated by Status:
// available{available_seats, prices}, landed{actual_departure_time_est,
// actual_arrival_time_est}, cancelled{}, delayed and "on time"
// {estimated_departure_time_est, estimated_arrival_time_est},
// flying{actual_departure_time_est, estimated_arrival_time_est}.
type FlightDate struct {
	Status                    string
	AvailableSeats            *pyjson.Map[int64] // cabin -> seats
	Prices                    *pyjson.Map[int64] // cabin -> price
	ActualDepartureTimeEst    string
	ActualArrivalTimeEst      string
	EstimatedDepartureTimeEst string
	EstimatedArrivalTimeEst   string
}

// MarshalPy dumps the variant in pydantic field order.
func (d *FlightDate) MarshalPy() (any, error) {
	switch d.Status {
	case StatusAvailable:
		return pyjson.NewObject("status", d.Status, "available_seats", d.AvailableSeats, "prices", d.Prices), nil
	case StatusLanded:
		return pyjson.NewObject("status", d.Status, "actual_departure_time_est", d.ActualDepartureTimeEst, "actual_arrival_time_est", d.ActualArrivalTimeEst), nil
	case StatusCancelled:
		return pyjson.NewObject("status", d.Status), nil
	case StatusDelayed, StatusOnTime:
		return pyjson.NewObject("status", d.Status, "estimated_departure_time_est", d.EstimatedDepartureTimeEst, "estimated_arrival_time_est", d.EstimatedArrivalTimeEst), nil
	case StatusFlying:
		return pyjson.NewObject("status", d.Status, "actual_departure_time_est", d.ActualDepartureTimeEst, "estimated_arrival_time_est", d.EstimatedArrivalTimeEst), nil
	}
	return nil, fmt.Errorf("airline: unknown flight status %q", d.Status)
}

type (
	availableDate struct {
		AvailableSeats pyjson.Map[int64] `json:"available_seats"`
		Prices         pyjson.Map[int64] `json:"prices"`
	}
	landedDate struct {
		Dep string `json:"actual_departure_time_est"`
		Arr string `json:"actual_arrival_time_est"`
	}
	estimatedDate struct {
		Dep string `json:"estimated_departure_time_est"`
		Arr string `json:"estimated_arrival_time_est"`
	}
	flyingDate struct {
		Dep string `json:"actual_departure_time_est"`
		Arr string `json:"estimated_arrival_time_est"`
	}
)

// UnmarshalPy validates the variant selected by status.
func (d *FlightDate) UnmarshalPy(v any) error {
	o, ok := v.(*pyjson.Object)
	if !ok {
		return pyjson.NewValidationError("", nil, "Input should be a valid dictionary", "model_type", v)
	}
	st, _ := o.Get("status")
	switch st {
	case StatusAvailable:
		var a availableDate
		if err := pyjson.FromValue(v, &a); err != nil {
			return err
		}
		for _, m := range []*pyjson.Map[int64]{&a.AvailableSeats, &a.Prices} {
			for _, k := range m.Keys() {
				if err := checkLiteral("FlightDateStatusAvailable", k, k, cabinClasses); err != nil {
					return err
				}
			}
		}
		*d = FlightDate{Status: StatusAvailable, AvailableSeats: &a.AvailableSeats, Prices: &a.Prices}
	case StatusLanded:
		var a landedDate
		if err := pyjson.FromValue(v, &a); err != nil {
			return err
		}
		*d = FlightDate{Status: StatusLanded, ActualDepartureTimeEst: a.Dep, ActualArrivalTimeEst: a.Arr}
	case StatusCancelled:
		*d = FlightDate{Status: StatusCancelled}
	case StatusDelayed, StatusOnTime:
		var a estimatedDate
		if err := pyjson.FromValue(v, &a); err != nil {
			return err
		}
		*d = FlightDate{Status: st.(string), EstimatedDepartureTimeEst: a.Dep, EstimatedArrivalTimeEst: a.Arr}
	case StatusFlying:
		var a flyingDate
		if err := pyjson.FromValue(v, &a); err != nil {
			return err
		}
		*d = FlightDate{Status: StatusFlying, ActualDepartureTimeEst: a.Dep, EstimatedArrivalTimeEst: a.Arr}
	default:
		return pyjson.NewValidationError("", []any{"status"}, "Input should be 'available', 'landed', 'cancelled', 'delayed', 'flying' or 'on time'", "literal_error", st)
	}
	return nil
}

// Flight is a scheduled flight with its status per date.
type Flight struct {
	FlightNumber              string                  `json:"flight_number"`
	Origin                    string                  `json:"origin"`
	Destination               string                  `json:"destination"`
	ScheduledDepartureTimeEst string                  `json:"scheduled_departure_time_est"`
	ScheduledArrivalTimeEst   string                  `json:"scheduled_arrival_time_est"`
	Dates                     pyjson.Map[*FlightDate] `json:"dates"`
}

// DirectFlight is a search result.
type DirectFlight struct {
	FlightNumber              string             `json:"flight_number"`
	Origin                    string             `json:"origin"`
	Destination               string             `json:"destination"`
	Status                    string             `json:"status"`
	ScheduledDepartureTimeEst string             `json:"scheduled_departure_time_est"`
	ScheduledArrivalTimeEst   string             `json:"scheduled_arrival_time_est"`
	Date                      *string            `json:"date"`
	AvailableSeats            *pyjson.Map[int64] `json:"available_seats"`
	Prices                    *pyjson.Map[int64] `json:"prices"`
}

// ReservationFlight is one flight of a reservation.
type ReservationFlight struct {
	FlightNumber string `json:"flight_number"`
	Origin       string `json:"origin"`
	Destination  string `json:"destination"`
	Date         string `json:"date"`
	Price        int64  `json:"price"`
}

// FlightInfo is a (flight_number, date) argument item.
type FlightInfo struct {
	FlightNumber string `json:"flight_number"`
	Date         string `json:"date"`
}

// User is an airline customer.
type User struct {
	UserID          string                     `json:"user_id"`
	Name            Name                       `json:"name"`
	Address         Address                    `json:"address"`
	Email           string                     `json:"email"`
	Dob             string                     `json:"dob"`
	PaymentMethods  pyjson.Map[*PaymentMethod] `json:"payment_methods"`
	SavedPassengers []Passenger                `json:"saved_passengers"`
	Membership      string                     `json:"membership"`
	Reservations    []string                   `json:"reservations"`
}

// Reservation is a booking.
type Reservation struct {
	ReservationID   string              `json:"reservation_id"`
	UserID          string              `json:"user_id"`
	Origin          string              `json:"origin"`
	Destination     string              `json:"destination"`
	FlightType      string              `json:"flight_type"`
	Cabin           string              `json:"cabin"`
	Flights         []ReservationFlight `json:"flights"`
	Passengers      []Passenger         `json:"passengers"`
	PaymentHistory  []Payment           `json:"payment_history"`
	CreatedAt       string              `json:"created_at"`
	TotalBaggages   int64               `json:"total_baggages"`
	NonfreeBaggages int64               `json:"nonfree_baggages"`
	Insurance       string              `json:"insurance"`
	Status          *string             `json:"status"`
}

// FlightDB is τ²'s FlightDB. Its three collections are copy-on-write
// tables: Fork is O(1) and an episode copies only the records it changes.
type FlightDB struct {
	Flights      pyjson.Table[*Flight]      `json:"flights"`
	Users        pyjson.Table[*User]        `json:"users"`
	Reservations pyjson.Table[*Reservation] `json:"reservations"`
}

// Fork returns an independent copy-on-write view of the DB.
func (db *FlightDB) Fork() env.DB {
	return &FlightDB{Flights: db.Flights.Fork(), Users: db.Users.Fork(), Reservations: db.Reservations.Fork()}
}

// ParseDB validates db.json content into a FlightDB (τ²'s FlightDB.load).
func ParseDB(text []byte) (*FlightDB, error) {
	var db FlightDB
	if err := pyjson.Unmarshal(text, &db); err != nil {
		return nil, fmt.Errorf("airline: db: %w", err)
	}
	for _, u := range db.Users.All() {
		if err := checkLiteral("User", "membership", u.Membership, memberships); err != nil {
			return nil, fmt.Errorf("airline: db: user %s: %w", u.UserID, err)
		}
	}
	for _, r := range db.Reservations.All() {
		for _, c := range []struct {
			f, v string
			vals []string
		}{{"flight_type", r.FlightType, flightTypes}, {"cabin", r.Cabin, cabinClasses}, {"insurance", r.Insurance, insurances}} {
			if err := checkLiteral("Reservation", c.f, c.v, c.vals); err != nil {
				return nil, fmt.Errorf("airline: db: reservation %s: %w", r.ReservationID, err)
			}
		}
		if r.Status != nil && *r.Status != "cancelled" {
			return nil, fmt.Errorf("airline: db: reservation %s: status %q is not 'cancelled'", r.ReservationID, *r.Status)
		}
	}
	return &db, nil
}

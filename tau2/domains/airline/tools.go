package airline

import (
	_ "embed"
	"errors"
	"fmt"
	"strconv"

	"tau2rl/tau2/env"
	"tau2rl/tau2/pycalc"
	"tau2rl/tau2/pyjson"
)

// τ²'s fixed "now", new reservation ids and new certificate ids.
const now = "2024-05-15T15:00:00"

var (
	newReservationIDs = []string{"HATHAT", "HATHAU", "HATHAV"}
	newCertificateIDs = []string{"certificate_3221322", "certificate_3221323", "certificate_3221324"}
)

//go:embed tools.json
var schemasJSON string

var schemas = env.MustParseSchemas(schemasJSON)

// Toolkit is AirlineTools, tools in τ²'s order.
var Toolkit = env.MustToolkit("AirlineTools", []*env.Tool{
	env.NewTool("book_reservation", env.Write, schemas.Get("book_reservation"), bookReservation),
	env.NewTool("calculate", env.Generic, schemas.Get("calculate"), calculate),
	env.NewTool("cancel_reservation", env.Write, schemas.Get("cancel_reservation"), cancelReservation),
	env.NewTool("get_reservation_details", env.Read, schemas.Get("get_reservation_details"), getReservationDetails),
	env.NewTool("get_user_details", env.Read, schemas.Get("get_user_details"), getUserDetails),
	env.NewTool("list_all_airports", env.Read, schemas.Get("list_all_airports"), listAllAirports),
	env.NewTool("search_direct_flight", env.Read, schemas.Get("search_direct_flight"), searchDirectFlight),
	env.NewTool("search_onestop_flight", env.Read, schemas.Get("search_onestop_flight"), searchOnestopFlight),
	env.NewTool("send_certificate", env.Write, schemas.Get("send_certificate"), sendCertificate),
	env.NewTool("transfer_to_human_agents", env.Generic, schemas.Get("transfer_to_human_agents"), transferToHumanAgents),
	env.NewTool("update_reservation_baggages", env.Write, schemas.Get("update_reservation_baggages"), updateReservationBaggages),
	env.NewTool("update_reservation_flights", env.Write, schemas.Get("update_reservation_flights"), updateReservationFlights),
	env.NewTool("update_reservation_passengers", env.Write, schemas.Get("update_reservation_passengers"), updateReservationPassengers),
	env.NewTool("get_flight_status", env.Read, schemas.Get("get_flight_status"), getFlightStatus),
})

// keyError is Python's str(KeyError(k)): the key's repr.
func keyError(k string) error { return errors.New(pyjson.Repr(k)) }

func getUser(db *FlightDB, id string) (*User, error) {
	u, ok := db.Users.Get(id)
	if !ok {
		return nil, fmt.Errorf("User %s not found", id)
	}
	return u, nil
}

func getReservation(db *FlightDB, id string) (*Reservation, error) {
	r, ok := db.Reservations.Get(id)
	if !ok {
		return nil, fmt.Errorf("Reservation %s not found", id)
	}
	return r, nil
}

func getFlight(db *FlightDB, number string) (*Flight, error) {
	f, ok := db.Flights.Get(number)
	if !ok {
		return nil, fmt.Errorf("Flight %s not found", number)
	}
	return f, nil
}

func getFlightInstance(db *FlightDB, number, date string) (*FlightDate, error) {
	f, err := getFlight(db, number)
	if err != nil {
		return nil, err
	}
	d, ok := f.Dates.Get(date)
	if !ok {
		return nil, fmt.Errorf("Flight %s not found on date %s", number, date)
	}
	return d, nil
}

// seats returns available_seats[cabin] or Python's KeyError.
func seatsOf(d *FlightDate, cabin string) (int64, error) {
	n, ok := d.AvailableSeats.Get(cabin)
	if !ok {
		return 0, keyError(cabin)
	}
	return n, nil
}

func priceOf(d *FlightDate, cabin string) (int64, error) {
	n, ok := d.Prices.Get(cabin)
	if !ok {
		return 0, keyError(cabin)
	}
	return n, nil
}

func bookReservation(db *FlightDB, a *env.Args) (any, error) {
	userID, origin, destination := a.Str("user_id"), a.Str("origin"), a.Str("destination")
	var flights []FlightInfo
	var passengers []Passenger
	var payments []Payment
	a.Models("flights", &flights)
	a.Models("passengers", &passengers)
	a.Models("payment_methods", &payments)
	totalBaggages, nonfreeBaggages := a.Int("total_baggages"), a.Int("nonfree_baggages")
	if err := a.Err(); err != nil {
		return nil, err
	}
	user, err := getUser(db, userID)
	if err != nil {
		return nil, err
	}
	resID := ""
	for _, id := range newReservationIDs {
		if !db.Reservations.Has(id) {
			resID = id
			break
		}
	}
	if resID == "" {
		return nil, errors.New("Too many reservations")
	}
	// Reservation(...) validation of the literal fields.
	for _, c := range []struct {
		f    string
		vals []string
	}{{"flight_type", flightTypes}, {"cabin", cabinClasses}, {"insurance", insurances}} {
		if err := checkLiteral("Reservation", c.f, a.Raw(c.f), c.vals); err != nil {
			return nil, err
		}
	}
	cabin, insurance := a.Str("cabin"), a.Str("insurance")
	res := &Reservation{
		ReservationID:   resID,
		UserID:          userID,
		Origin:          origin,
		Destination:     destination,
		FlightType:      a.Str("flight_type"),
		Cabin:           cabin,
		Flights:         []ReservationFlight{},
		Passengers:      append([]Passenger{}, passengers...),
		PaymentHistory:  append([]Payment{}, payments...),
		CreatedAt:       now,
		TotalBaggages:   totalBaggages,
		NonfreeBaggages: nonfreeBaggages,
		Insurance:       insurance,
	}
	pax := int64(len(passengers))
	var total int64
	for _, fi := range flights {
		f, err := getFlight(db, fi.FlightNumber)
		if err != nil {
			return nil, err
		}
		d, err := getFlightInstance(db, fi.FlightNumber, fi.Date)
		if err != nil {
			return nil, err
		}
		if d.Status != StatusAvailable {
			return nil, fmt.Errorf("Flight %s not available on date %s", fi.FlightNumber, fi.Date)
		}
		seats, err := seatsOf(d, cabin)
		if err != nil {
			return nil, err
		}
		if seats < pax {
			return nil, fmt.Errorf("Not enough seats on flight %s", fi.FlightNumber)
		}
		price, err := priceOf(d, cabin)
		if err != nil {
			return nil, err
		}
		res.Flights = append(res.Flights, ReservationFlight{
			FlightNumber: fi.FlightNumber, Origin: f.Origin, Destination: f.Destination, Date: fi.Date, Price: price,
		})
		total += price * pax
	}
	if insurance == "yes" {
		total += 30 * pax
	}
	total += 50 * nonfreeBaggages

	for _, p := range payments {
		m, ok := user.PaymentMethods.Get(p.PaymentID)
		if !ok {
			return nil, fmt.Errorf("Payment method %s not found", p.PaymentID)
		}
		if (m.Source == SourceGiftCard || m.Source == SourceCertificate) && m.Amount < float64(p.Amount) {
			return nil, fmt.Errorf("Not enough balance in payment method %s", p.PaymentID)
		}
	}
	var paid int64
	for _, p := range payments {
		paid += p.Amount
	}
	if paid != total {
		return nil, fmt.Errorf("Payment amount does not add up, total price is %d, but paid %d", total, paid)
	}

	// All checks passed: deduct payments (a used certificate is removed,
	// whatever its leftover value; paying twice with one certificate fails
	// on the second removal after the first one happened, as in Python).
	user, _ = db.Users.Mut(userID)
	for _, p := range payments {
		m, ok := user.PaymentMethods.Get(p.PaymentID)
		if !ok {
			return nil, keyError(p.PaymentID)
		}
		switch m.Source {
		case SourceGiftCard:
			m.Amount -= float64(p.Amount)
		case SourceCertificate:
			user.PaymentMethods.Delete(p.PaymentID)
		}
	}
	for _, fi := range flights {
		f, _ := db.Flights.Mut(fi.FlightNumber)
		d, _ := f.Dates.Get(fi.Date)
		n, _ := d.AvailableSeats.Get(cabin)
		d.AvailableSeats.Set(cabin, n-pax)
	}
	db.Reservations.Set(resID, res)
	user.Reservations = append(user.Reservations, resID)
	return res, nil
}

func calculate(db *FlightDB, a *env.Args) (any, error) {
	expr := a.Str("expression")
	if err := a.Err(); err != nil {
		return nil, err
	}
	return pycalc.Calculate(expr)
}

func cancelReservation(db *FlightDB, a *env.Args) (any, error) {
	id := a.Str("reservation_id")
	if err := a.Err(); err != nil {
		return nil, err
	}
	if _, err := getReservation(db, id); err != nil {
		return nil, err
	}
	r, _ := db.Reservations.Mut(id)
	// Refund every payment so far (including earlier refunds); no status
	// check, no seat release, no gift card credit.
	refunds := make([]Payment, 0, len(r.PaymentHistory))
	for _, p := range r.PaymentHistory {
		refunds = append(refunds, Payment{PaymentID: p.PaymentID, Amount: -p.Amount})
	}
	r.PaymentHistory = append(r.PaymentHistory, refunds...)
	cancelled := "cancelled"
	r.Status = &cancelled
	return r, nil
}

func getReservationDetails(db *FlightDB, a *env.Args) (any, error) {
	id := a.Str("reservation_id")
	if err := a.Err(); err != nil {
		return nil, err
	}
	return getReservation(db, id)
}

func getUserDetails(db *FlightDB, a *env.Args) (any, error) {
	id := a.Str("user_id")
	if err := a.Err(); err != nil {
		return nil, err
	}
	return getUser(db, id)
}

// AirportCode is an entry of list_all_airports.
type AirportCode struct {
	IATA string `json:"iata"`
	City string `json:"city"`
}

var airports = []AirportCode{
	{"SFO", "San Francisco"}, {"JFK", "New York"}, {"LAX", "Los Angeles"}, {"ORD", "Chicago"},
	{"DFW", "Dallas"}, {"DEN", "Denver"}, {"SEA", "Seattle"}, {"ATL", "Atlanta"}, {"MIA", "Miami"},
	{"BOS", "Boston"}, {"PHX", "Phoenix"}, {"IAH", "Houston"}, {"LAS", "Las Vegas"},
	{"MCO", "Orlando"}, {"EWR", "Newark"}, {"CLT", "Charlotte"}, {"MSP", "Minneapolis"},
	{"DTW", "Detroit"}, {"PHL", "Philadelphia"}, {"LGA", "LaGuardia"},
}

func listAllAirports(db *FlightDB, a *env.Args) (any, error) {
	return airports, nil
}

// searchDirect is τ²'s _search_direct_flight; empty origin/destination or
// leaveAfter mean None.
func searchDirect(db *FlightDB, date string, origin, destination, leaveAfter *string) []*DirectFlight {
	var out []*DirectFlight
	for _, f := range db.Flights.All() {
		if origin != nil && f.Origin != *origin {
			continue
		}
		if destination != nil && f.Destination != *destination {
			continue
		}
		d, ok := f.Dates.Get(date)
		if !ok || d.Status != StatusAvailable {
			continue
		}
		if leaveAfter != nil && f.ScheduledDepartureTimeEst < *leaveAfter {
			continue
		}
		out = append(out, &DirectFlight{
			FlightNumber:              f.FlightNumber,
			Origin:                    f.Origin,
			Destination:               f.Destination,
			Status:                    StatusAvailable,
			ScheduledDepartureTimeEst: f.ScheduledDepartureTimeEst,
			ScheduledArrivalTimeEst:   f.ScheduledArrivalTimeEst,
			AvailableSeats:            d.AvailableSeats.ShallowClone(),
			Prices:                    d.Prices.ShallowClone(),
		})
	}
	return out
}

func searchDirectFlight(db *FlightDB, a *env.Args) (any, error) {
	origin, destination, date := a.Str("origin"), a.Str("destination"), a.Str("date")
	if err := a.Err(); err != nil {
		return nil, err
	}
	res := searchDirect(db, date, &origin, &destination, nil)
	if res == nil {
		res = []*DirectFlight{}
	}
	return res, nil
}

func searchOnestopFlight(db *FlightDB, a *env.Args) (any, error) {
	origin, destination, date := a.Str("origin"), a.Str("destination"), a.Str("date")
	if err := a.Err(); err != nil {
		return nil, err
	}
	results := [][]*DirectFlight{}
	for _, r1 := range searchDirect(db, date, &origin, nil, nil) {
		d1 := date
		r1.Date = &d1
		date2 := date
		if containsPlus1(r1.ScheduledArrivalTimeEst) {
			// τ²: f"2024-05-{int(date[-2:]) + 1}" — no zero padding, so a
			// next day before the 10th ("2024-05-6") matches no flight.
			tail := date
			if len(tail) > 2 {
				tail = tail[len(tail)-2:]
			}
			n, err := pyInt(tail)
			if err != nil {
				return nil, err
			}
			date2 = "2024-05-" + strconv.FormatInt(n+1, 10)
		}
		for _, r2 := range searchDirect(db, date2, &r1.Destination, &destination, &r1.ScheduledArrivalTimeEst) {
			d2 := date2
			r2.Date = &d2
			results = append(results, []*DirectFlight{r1, r2})
		}
	}
	return results, nil
}

func containsPlus1(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '+' && s[i+1] == '1' {
			return true
		}
	}
	return false
}

// pyInt is Python's int(s) for a short decimal string (surrounding
// whitespace and a sign allowed).
func pyInt(s string) (int64, error) {
	t := s
	for len(t) > 0 && (t[0] == ' ' || t[0] == '\t' || t[0] == '\n') {
		t = t[1:]
	}
	for len(t) > 0 && (t[len(t)-1] == ' ' || t[len(t)-1] == '\t' || t[len(t)-1] == '\n') {
		t = t[:len(t)-1]
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || t == "" || t[0] == '+' && len(t) == 1 {
		return 0, fmt.Errorf("invalid literal for int() with base 10: %s", pyjson.Repr(s))
	}
	return n, nil
}

func sendCertificate(db *FlightDB, a *env.Args) (any, error) {
	userID := a.Str("user_id")
	if err := a.Err(); err != nil {
		return nil, err
	}
	amount := a.Raw("amount")
	if _, err := getUser(db, userID); err != nil {
		return nil, err
	}
	user, _ := db.Users.Mut(userID)
	for _, id := range newCertificateIDs {
		if user.PaymentMethods.Has(id) {
			continue
		}
		var c balanceMethod
		if err := pyjson.FromValue(pyjson.NewObject("source", SourceCertificate, "id", id, "amount", amount), &c); err != nil {
			if ve, ok := err.(*pyjson.ValidationError); ok {
				ve.Model = "Certificate"
			}
			return nil, err
		}
		user.PaymentMethods.Set(id, &PaymentMethod{Source: SourceCertificate, ID: id, Amount: c.Amount})
		return fmt.Sprintf("Certificate %s added to user %s with amount %s.", id, userID, pyjson.Str(amount)), nil
	}
	return nil, errors.New("Too many certificates")
}

func transferToHumanAgents(db *FlightDB, a *env.Args) (any, error) {
	a.Str("summary")
	if err := a.Err(); err != nil {
		return nil, err
	}
	return "Transfer successful", nil
}

// paymentForUpdate is τ²'s _payment_for_update on a mutable user: it checks
// the method, debits a gift card and returns the payment to record (nil for
// a zero total).
func paymentForUpdate(user *User, paymentID string, total int64) (*Payment, error) {
	m, ok := user.PaymentMethods.Get(paymentID)
	if !ok {
		return nil, errors.New("Payment method not found")
	}
	switch {
	case m.Source == SourceCertificate:
		return nil, errors.New("Certificate cannot be used to update reservation")
	case m.Source == SourceGiftCard && m.Amount < float64(total):
		return nil, errors.New("Gift card balance is not enough")
	}
	if m.Source == SourceGiftCard {
		m.Amount -= float64(total)
	}
	if total == 0 {
		return nil, nil
	}
	return &Payment{PaymentID: paymentID, Amount: total}, nil
}

func updateReservationBaggages(db *FlightDB, a *env.Args) (any, error) {
	id := a.Str("reservation_id")
	totalBags, nonfreeBags := a.Int("total_baggages"), a.Int("nonfree_baggages")
	paymentID := a.Str("payment_id")
	if err := a.Err(); err != nil {
		return nil, err
	}
	r, err := getReservation(db, id)
	if err != nil {
		return nil, err
	}
	if _, err := getUser(db, r.UserID); err != nil {
		return nil, err
	}
	total := 50 * max(0, nonfreeBags-r.NonfreeBaggages)
	user, _ := db.Users.Mut(r.UserID)
	p, err := paymentForUpdate(user, paymentID, total)
	if err != nil {
		return nil, err
	}
	r, _ = db.Reservations.Mut(id)
	if p != nil {
		r.PaymentHistory = append(r.PaymentHistory, *p)
	}
	r.TotalBaggages = totalBags
	r.NonfreeBaggages = nonfreeBags
	return r, nil
}

func updateReservationFlights(db *FlightDB, a *env.Args) (any, error) {
	id, cabin := a.Str("reservation_id"), a.Str("cabin")
	var flights []FlightInfo
	a.Models("flights", &flights)
	paymentID := a.Str("payment_id")
	if err := a.Err(); err != nil {
		return nil, err
	}
	r, err := getReservation(db, id)
	if err != nil {
		return nil, err
	}
	if _, err := getUser(db, r.UserID); err != nil {
		return nil, err
	}
	pax := int64(len(r.Passengers))
	var total int64
	newFlights := make([]ReservationFlight, 0, len(flights))
	for _, fi := range flights {
		// An existing flight is kept at its old price only when the cabin
		// does not change.
		kept := false
		for _, rf := range r.Flights {
			if rf.FlightNumber == fi.FlightNumber && rf.Date == fi.Date && cabin == r.Cabin {
				total += rf.Price * pax
				newFlights = append(newFlights, rf)
				kept = true
				break
			}
		}
		if kept {
			continue
		}
		f, err := getFlight(db, fi.FlightNumber)
		if err != nil {
			return nil, err
		}
		d, err := getFlightInstance(db, fi.FlightNumber, fi.Date)
		if err != nil {
			return nil, err
		}
		if d.Status != StatusAvailable {
			return nil, fmt.Errorf("Flight %s not available on date %s", fi.FlightNumber, fi.Date)
		}
		seats, err := seatsOf(d, cabin)
		if err != nil {
			return nil, err
		}
		if seats < pax {
			return nil, fmt.Errorf("Not enough seats on flight %s", fi.FlightNumber)
		}
		price, err := priceOf(d, cabin)
		if err != nil {
			return nil, err
		}
		newFlights = append(newFlights, ReservationFlight{
			FlightNumber: fi.FlightNumber, Origin: f.Origin, Destination: f.Destination, Date: fi.Date, Price: price,
		})
		total += price * pax
	}
	var old int64
	for _, rf := range r.Flights {
		old += rf.Price
	}
	total -= old * pax

	user, _ := db.Users.Mut(r.UserID)
	p, err := paymentForUpdate(user, paymentID, total)
	if err != nil {
		return nil, err
	}
	r, _ = db.Reservations.Mut(id)
	if p != nil {
		r.PaymentHistory = append(r.PaymentHistory, *p)
	}
	// Seats are not moved (τ² "assumes it takes time to be updated").
	r.Flights = newFlights
	r.Cabin = cabin
	return r, nil
}

func updateReservationPassengers(db *FlightDB, a *env.Args) (any, error) {
	id := a.Str("reservation_id")
	var passengers []Passenger
	a.Models("passengers", &passengers)
	if err := a.Err(); err != nil {
		return nil, err
	}
	r, err := getReservation(db, id)
	if err != nil {
		return nil, err
	}
	if len(passengers) != len(r.Passengers) {
		return nil, errors.New("Number of passengers does not match")
	}
	r, _ = db.Reservations.Mut(id)
	r.Passengers = append([]Passenger{}, passengers...)
	return r, nil
}

func getFlightStatus(db *FlightDB, a *env.Args) (any, error) {
	number, date := a.Str("flight_number"), a.Str("date")
	if err := a.Err(); err != nil {
		return nil, err
	}
	d, err := getFlightInstance(db, number, date)
	if err != nil {
		return nil, err
	}
	return d.Status, nil
}

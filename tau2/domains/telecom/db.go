package telecom

import (
	"slices"

	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
)

// The agent-side database (τ²'s TelecomDB, data_model.py). Collections are
// lists scanned in order, exactly as τ² does, because first-match lookups and
// tool outputs depend on that order. Records are held by pointer so that a
// lookup returns the live record a tool then mutates, as Python references do.

// LineStatus is a line's lifecycle state (τ²'s LineStatus str-Enum).
type LineStatus string

// Line statuses.
const (
	LineActive            LineStatus = "Active"
	LineSuspended         LineStatus = "Suspended"
	LinePendingActivation LineStatus = "Pending Activation"
	LineClosed            LineStatus = "Closed"
)

var lineStatuses = []string{"Active", "Suspended", "Pending Activation", "Closed"}

// BillStatus is a bill's state (τ²'s BillStatus str-Enum).
type BillStatus string

// Bill statuses.
const (
	BillDraft           BillStatus = "Draft"
	BillIssued          BillStatus = "Issued"
	BillAwaitingPayment BillStatus = "Awaiting Payment"
	BillPaid            BillStatus = "Paid"
	BillOverdue         BillStatus = "Overdue"
	BillDisputed        BillStatus = "Disputed"
)

var billStatuses = []string{"Draft", "Issued", "Awaiting Payment", "Paid", "Overdue", "Disputed"}

var deviceTypes = []string{"phone", "router", "tablet", "watch", "other"}
var accountStatuses = []string{"Active", "Suspended", "Pending Verification", "Closed"}
var paymentMethodTypes = []string{"Credit Card", "Debit Card", "PayPal"}

// Plan is a service plan.
type Plan struct {
	PlanID                  string
	Name                    string
	DataLimitGB             float64
	PricePerMonth           float64
	DataRefuelingPricePerGB float64
}

// Device is a customer device known to the carrier.
type Device struct {
	DeviceID             string
	DeviceType           string
	Model                string
	IMEI                 *string
	IsESIMCapable        bool
	Activated            bool
	ActivationDate       *DateTime
	LastESIMTransferDate *DateTime
}

// Line is a phone/data line.
type Line struct {
	LineID                 string
	PhoneNumber            string
	Status                 LineStatus
	PlanID                 string
	DeviceID               *string
	DataUsedGB             float64
	DataRefuelingGB        float64
	RoamingEnabled         bool
	ContractEndDate        *Date
	LastPlanChangeDate     *Date
	LastSIMReplacementDate *Date
	SuspensionStartDate    *Date
}

// LineItem is one charge or credit on a bill.
type LineItem struct {
	Description string
	Amount      float64
	Date        Date
	ItemType    string
}

// Bill is a customer bill.
type Bill struct {
	BillID      string
	CustomerID  string
	PeriodStart Date
	PeriodEnd   Date
	IssueDate   Date
	TotalDue    float64
	DueDate     Date
	LineItems   []LineItem
	Status      BillStatus
}

// Address is a billing address.
type Address struct {
	Street, City, State, ZipCode string
}

// PaymentMethod is a stored payment method.
type PaymentMethod struct {
	MethodType         string
	AccountNumberLast4 string
	ExpirationDate     string
}

// Customer is a carrier customer.
type Customer struct {
	CustomerID                 string
	FullName                   string
	DateOfBirth                string
	Email                      string
	PhoneNumber                string
	Address                    Address
	AccountStatus              string
	PaymentMethods             []PaymentMethod
	LineIDs                    []string
	BillIDs                    []string
	CreatedAt                  DateTime
	LastExtensionDate          *Date
	GoodwillCreditUsedThisYear float64
}

// DB is the agent-side telecom database.
type DB struct {
	Plans     []*Plan     `json:"plans"`
	Customers []*Customer `json:"customers"`
	Lines     []*Line     `json:"lines"`
	Bills     []*Bill     `json:"bills"`
	Devices   []*Device   `json:"devices"`
}

// Fork implements env.DB: an independent deep copy for one episode (the DB
// is a few KB, so a full copy is cheaper than copy-on-write bookkeeping).
func (db *DB) Fork() env.DB { return db.Clone() }

// Clone returns a deep copy; every episode mutates its own copy.
func (db *DB) Clone() *DB {
	c := &DB{
		Plans:     make([]*Plan, len(db.Plans)),
		Customers: make([]*Customer, len(db.Customers)),
		Lines:     make([]*Line, len(db.Lines)),
		Bills:     make([]*Bill, len(db.Bills)),
		Devices:   make([]*Device, len(db.Devices)),
	}
	for i, p := range db.Plans {
		cp := *p
		c.Plans[i] = &cp
	}
	for i, cu := range db.Customers {
		cp := *cu
		cp.PaymentMethods = slices.Clone(cu.PaymentMethods)
		cp.LineIDs = slices.Clone(cu.LineIDs)
		cp.BillIDs = slices.Clone(cu.BillIDs)
		cp.LastExtensionDate = clonePtr(cu.LastExtensionDate)
		c.Customers[i] = &cp
	}
	for i, l := range db.Lines {
		cp := *l
		cp.DeviceID = clonePtr(l.DeviceID)
		cp.ContractEndDate = clonePtr(l.ContractEndDate)
		cp.LastPlanChangeDate = clonePtr(l.LastPlanChangeDate)
		cp.LastSIMReplacementDate = clonePtr(l.LastSIMReplacementDate)
		cp.SuspensionStartDate = clonePtr(l.SuspensionStartDate)
		c.Lines[i] = &cp
	}
	for i, b := range db.Bills {
		cp := *b
		cp.LineItems = slices.Clone(b.LineItems)
		c.Bills[i] = &cp
	}
	for i, d := range db.Devices {
		cp := *d
		cp.IMEI = clonePtr(d.IMEI)
		cp.ActivationDate = clonePtr(d.ActivationDate)
		cp.LastESIMTransferDate = clonePtr(d.LastESIMTransferDate)
		c.Devices[i] = &cp
	}
	return c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Dump functions mirror pydantic's model_dump(): every field, in declaration
// order, None as nil; dates become their str() form (json.dumps(default=str)
// is the only consumer, so the string is what τ² would emit).

func strPtrValue(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func datePtrValue(p *Date) any {
	if p == nil {
		return nil
	}
	return p.String()
}

func dateTimePtrValue(p *DateTime) any {
	if p == nil {
		return nil
	}
	return p.String()
}

func (p *Plan) dump() *pyjson.Object {
	return pyjson.NewObject(
		"plan_id", p.PlanID,
		"name", p.Name,
		"data_limit_gb", p.DataLimitGB,
		"price_per_month", p.PricePerMonth,
		"data_refueling_price_per_gb", p.DataRefuelingPricePerGB,
	)
}

func (d *Device) dump() *pyjson.Object {
	return pyjson.NewObject(
		"device_id", d.DeviceID,
		"device_type", d.DeviceType,
		"model", d.Model,
		"imei", strPtrValue(d.IMEI),
		"is_esim_capable", d.IsESIMCapable,
		"activated", d.Activated,
		"activation_date", dateTimePtrValue(d.ActivationDate),
		"last_esim_transfer_date", dateTimePtrValue(d.LastESIMTransferDate),
	)
}

func (l *Line) dump() *pyjson.Object {
	return pyjson.NewObject(
		"line_id", l.LineID,
		"phone_number", l.PhoneNumber,
		"status", string(l.Status),
		"plan_id", l.PlanID,
		"device_id", strPtrValue(l.DeviceID),
		"data_used_gb", l.DataUsedGB,
		"data_refueling_gb", l.DataRefuelingGB,
		"roaming_enabled", l.RoamingEnabled,
		"contract_end_date", datePtrValue(l.ContractEndDate),
		"last_plan_change_date", datePtrValue(l.LastPlanChangeDate),
		"last_sim_replacement_date", datePtrValue(l.LastSIMReplacementDate),
		"suspension_start_date", datePtrValue(l.SuspensionStartDate),
	)
}

func (li *LineItem) dump() *pyjson.Object {
	return pyjson.NewObject(
		"description", li.Description,
		"amount", li.Amount,
		"date", li.Date.String(),
		"item_type", li.ItemType,
	)
}

func (b *Bill) dump() *pyjson.Object {
	items := make([]any, len(b.LineItems))
	for i := range b.LineItems {
		items[i] = b.LineItems[i].dump()
	}
	return pyjson.NewObject(
		"bill_id", b.BillID,
		"customer_id", b.CustomerID,
		"period_start", b.PeriodStart.String(),
		"period_end", b.PeriodEnd.String(),
		"issue_date", b.IssueDate.String(),
		"total_due", b.TotalDue,
		"due_date", b.DueDate.String(),
		"line_items", items,
		"status", string(b.Status),
	)
}

func stringsValue(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func (c *Customer) dump() *pyjson.Object {
	pms := make([]any, len(c.PaymentMethods))
	for i, pm := range c.PaymentMethods {
		pms[i] = pyjson.NewObject(
			"method_type", pm.MethodType,
			"account_number_last_4", pm.AccountNumberLast4,
			"expiration_date", pm.ExpirationDate,
		)
	}
	return pyjson.NewObject(
		"customer_id", c.CustomerID,
		"full_name", c.FullName,
		"date_of_birth", c.DateOfBirth,
		"email", c.Email,
		"phone_number", c.PhoneNumber,
		"address", pyjson.NewObject(
			"street", c.Address.Street,
			"city", c.Address.City,
			"state", c.Address.State,
			"zip_code", c.Address.ZipCode,
		),
		"account_status", c.AccountStatus,
		"payment_methods", pms,
		"line_ids", stringsValue(c.LineIDs),
		"bill_ids", stringsValue(c.BillIDs),
		"created_at", c.CreatedAt.String(),
		"last_extension_date", datePtrValue(c.LastExtensionDate),
		"goodwill_credit_used_this_year", c.GoodwillCreditUsedThisYear,
	)
}

// Dump returns the whole DB as τ²'s TelecomDB.model_dump() (generic JSON values).
func (db *DB) Dump() *pyjson.Object {
	plans := make([]any, len(db.Plans))
	for i, p := range db.Plans {
		plans[i] = p.dump()
	}
	customers := make([]any, len(db.Customers))
	for i, c := range db.Customers {
		customers[i] = c.dump()
	}
	lines := make([]any, len(db.Lines))
	for i, l := range db.Lines {
		lines[i] = l.dump()
	}
	bills := make([]any, len(db.Bills))
	for i, b := range db.Bills {
		bills[i] = b.dump()
	}
	devices := make([]any, len(db.Devices))
	for i, d := range db.Devices {
		devices[i] = d.dump()
	}
	return pyjson.NewObject(
		"plans", plans,
		"customers", customers,
		"lines", lines,
		"bills", bills,
		"devices", devices,
	)
}

// The record types implement pyjson.Marshaler / pyjson.Unmarshaler with the
// dumps above and the validators of validate.go, so the framework's hashing,
// equality and initialization_data merging see exactly τ²'s model_dump().

// MarshalPy implements pyjson.Marshaler.
func (p Plan) MarshalPy() (any, error) { return p.dump(), nil }

// UnmarshalPy implements pyjson.Unmarshaler.
func (p *Plan) UnmarshalPy(v any) error { return assign(p, validatePlan, v) }

// MarshalPy implements pyjson.Marshaler.
func (d Device) MarshalPy() (any, error) { return d.dump(), nil }

// UnmarshalPy implements pyjson.Unmarshaler.
func (d *Device) UnmarshalPy(v any) error { return assign(d, validateDevice, v) }

// MarshalPy implements pyjson.Marshaler.
func (l Line) MarshalPy() (any, error) { return l.dump(), nil }

// UnmarshalPy implements pyjson.Unmarshaler.
func (l *Line) UnmarshalPy(v any) error { return assign(l, validateLine, v) }

// MarshalPy implements pyjson.Marshaler.
func (b Bill) MarshalPy() (any, error) { return b.dump(), nil }

// UnmarshalPy implements pyjson.Unmarshaler.
func (b *Bill) UnmarshalPy(v any) error { return assign(b, validateBill, v) }

// MarshalPy implements pyjson.Marshaler.
func (c Customer) MarshalPy() (any, error) { return c.dump(), nil }

// UnmarshalPy implements pyjson.Unmarshaler.
func (c *Customer) UnmarshalPy(v any) error { return assign(c, validateCustomer, v) }

func assign[T any](dst *T, validate func(v any, path []any) (*T, error), v any) error {
	x, err := validate(v, nil)
	if err != nil {
		return err
	}
	*dst = *x
	return nil
}

package telecom

import (
	"fmt"
	"math"
	"slices"

	"tau2rl/tau2/pyjson"
)

// Agent-side toolkit (τ²'s TelecomTools, tools.py): lookups scan the DB lists
// in order; errors carry τ²'s ValueError texts.

const agentClass = "TelecomTools"

// Tools return live DB records (pointers implementing pyjson.Marshaler), as
// τ²'s tools return the pydantic objects themselves: the result is
// serialized after sync_tools ran, so it shows the synced state, exactly as
// in Python. to_json_str dumps models untouched and stringifies bare numbers.

func (e *view) customerByID(id any) (*Customer, error) {
	if s, ok := id.(string); ok {
		for _, c := range e.db.Customers {
			if c.CustomerID == s {
				return c, nil
			}
		}
	}
	return nil, fmt.Errorf("Customer with ID %s not found", pyStr(id))
}

func (e *view) lineByID(id any) (*Line, error) {
	if s, ok := id.(string); ok {
		for _, l := range e.db.Lines {
			if l.LineID == s {
				return l, nil
			}
		}
	}
	return nil, fmt.Errorf("Line with ID %s not found", pyStr(id))
}

func (e *view) lineByPhone(phone string) (*Line, error) {
	for _, l := range e.db.Lines {
		if l.PhoneNumber == phone {
			return l, nil
		}
	}
	return nil, fmt.Errorf("Line with phone number %s not found", phone)
}

func (e *view) planByID(id string) (*Plan, error) {
	for _, p := range e.db.Plans {
		if p.PlanID == id {
			return p, nil
		}
	}
	return nil, fmt.Errorf("Plan with ID %s not found", id)
}

func (e *view) deviceByID(id string) (*Device, error) {
	for _, d := range e.db.Devices {
		if d.DeviceID == id {
			return d, nil
		}
	}
	return nil, fmt.Errorf("Device with ID %s not found", id)
}

func (e *view) billByID(id any) (*Bill, error) {
	if s, ok := id.(string); ok {
		for _, b := range e.db.Bills {
			if b.BillID == s {
				return b, nil
			}
		}
	}
	return nil, fmt.Errorf("Bill with ID %s not found", pyStr(id))
}

// customerByPhone is get_customer_by_phone: primary number first, then the
// customer's lines, customer by customer.
func (e *view) customerByPhone(phone any) (*Customer, error) {
	s, isStr := phone.(string)
	for _, c := range e.db.Customers {
		if isStr && c.PhoneNumber == s {
			return c, nil
		}
		for _, lid := range c.LineIDs {
			l, err := e.lineByID(lid)
			if err != nil {
				return nil, err
			}
			if isStr && l.PhoneNumber == s {
				return c, nil
			}
		}
	}
	return nil, fmt.Errorf("Customer with phone number %s not found", pyStr(phone))
}

// targetLine is _get_target_line.
func (e *view) targetLine(customerID, lineID any) (*Line, error) {
	c, err := e.customerByID(customerID)
	if err != nil {
		return nil, err
	}
	if s, ok := lineID.(string); !ok || !slices.Contains(c.LineIDs, s) {
		return nil, fmt.Errorf("Line %s not found for customer %s", pyStr(lineID), pyStr(customerID))
	}
	return e.lineByID(lineID)
}

func (e *view) billsAwaitingPayment(c *Customer) ([]*Bill, error) {
	var out []*Bill
	for _, id := range c.BillIDs {
		b, err := e.billByID(id)
		if err != nil {
			return nil, err
		}
		if b.Status == BillAwaitingPayment {
			out = append(out, b)
		}
	}
	return out, nil
}

func (e *view) getCustomerByPhone(k kwargs) (any, error) {
	c, err := e.customerByPhone(k.get("phone_number", nil))
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (e *view) getCustomerByID(k kwargs) (any, error) {
	c, err := e.customerByID(k.get("customer_id", nil))
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (e *view) getCustomerByName(k kwargs) (any, error) {
	name := k.get("full_name", nil)
	dob := k.get("dob", nil)
	out := []any{}
	for _, c := range e.db.Customers {
		s, ok := name.(string)
		if !ok {
			return nil, attrErr(name, "lower")
		}
		if pyjson.Lower(c.FullName) == pyjson.Lower(s) && dob == any(c.DateOfBirth) {
			out = append(out, c)
		}
	}
	return out, nil
}

func (e *view) getDetailsByID(k kwargs) (any, error) {
	v := k.get("id", nil)
	id, ok := v.(string)
	if !ok {
		return nil, attrErr(v, "startswith")
	}
	if id == "" {
		return nil, fmt.Errorf("Unknown ID format or type: %s", id)
	}
	switch id[0] {
	case 'L':
		l, err := e.lineByID(id)
		if err != nil {
			return nil, err
		}
		return l, nil
	case 'D':
		d, err := e.deviceByID(id)
		if err != nil {
			return nil, err
		}
		return d, nil
	case 'B':
		b, err := e.billByID(id)
		if err != nil {
			return nil, err
		}
		return b, nil
	case 'C':
		c, err := e.customerByID(id)
		if err != nil {
			return nil, err
		}
		return c, nil
	case 'P':
		p, err := e.planByID(id)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	return nil, fmt.Errorf("Unknown ID format or type: %s", id)
}

func (e *view) suspendLine(k kwargs) (any, error) {
	l, err := e.targetLine(k.get("customer_id", nil), k.get("line_id", nil))
	if err != nil {
		return nil, err
	}
	if l.Status != LineActive {
		return nil, fmt.Errorf("Line must be active to suspend")
	}
	l.Status = LineSuspended
	d := today
	l.SuspensionStartDate = &d
	return pyjson.NewObject(
		"message", "Line suspended successfully. $5/month holding fee will apply.",
		"line", l,
	), nil
}

func (e *view) resumeLine(k kwargs) (any, error) {
	l, err := e.targetLine(k.get("customer_id", nil), k.get("line_id", nil))
	if err != nil {
		return nil, err
	}
	if l.Status != LineSuspended && l.Status != LinePendingActivation {
		return nil, fmt.Errorf("Line must be suspended to resume")
	}
	l.Status = LineActive
	l.SuspensionStartDate = nil
	return pyjson.NewObject(
		"message", "Line resumed successfully",
		"line", l,
	), nil
}

func (e *view) getBillsForCustomer(k kwargs) (any, error) {
	c, err := e.customerByID(k.get("customer_id", nil))
	if err != nil {
		return nil, err
	}
	bills := make([]*Bill, 0, len(c.BillIDs))
	for _, id := range c.BillIDs {
		b, err := e.billByID(id)
		if err != nil {
			return nil, err
		}
		bills = append(bills, b)
	}
	// sorted(reverse=True) is stable: equal dates keep their order.
	slices.SortStableFunc(bills, func(a, b *Bill) int {
		switch {
		case b.IssueDate.Less(a.IssueDate):
			return -1
		case a.IssueDate.Less(b.IssueDate):
			return 1
		}
		return 0
	})
	end, err := sliceEnd(k.get("limit", int64(12)), len(bills))
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, end)
	for _, b := range bills[:end] {
		out = append(out, b)
	}
	return out, nil
}

// sliceEnd is the end index of Python's seq[:limit].
func sliceEnd(limit any, n int) (int, error) {
	var l int64
	switch x := limit.(type) {
	case nil:
		return n, nil
	case int64:
		l = x
	case bool:
		if x {
			l = 1
		}
	default:
		return 0, fmt.Errorf("slice indices must be integers or None or have an __index__ method")
	}
	if l < 0 {
		l += int64(n)
		if l < 0 {
			l = 0
		}
	}
	if l > int64(n) {
		l = int64(n)
	}
	return int(l), nil
}

func (e *view) sendPaymentRequest(k kwargs) (any, error) {
	cid, bid := k.get("customer_id", nil), k.get("bill_id", nil)
	c, err := e.customerByID(cid)
	if err != nil {
		return nil, err
	}
	awaiting, err := e.billsAwaitingPayment(c)
	if err != nil {
		return nil, err
	}
	if len(awaiting) != 0 {
		return nil, fmt.Errorf("A bill is already awaiting payment for this customer")
	}
	if s, ok := bid.(string); !ok || !slices.Contains(c.BillIDs, s) {
		return nil, fmt.Errorf("Bill %s not found for customer %s", pyStr(bid), pyStr(cid))
	}
	b, err := e.billByID(bid)
	if err != nil {
		return nil, err
	}
	b.Status = BillAwaitingPayment
	return "Payment request sent to the customer for bill " + b.BillID, nil
}

func (e *view) getDataUsage(k kwargs) (any, error) {
	lineID := k.get("line_id", nil)
	l, err := e.targetLine(k.get("customer_id", nil), lineID)
	if err != nil {
		return nil, err
	}
	p, err := e.planByID(l.PlanID)
	if err != nil {
		return nil, err
	}
	cycleEnd := Date{Year: today.Year, Month: today.Month + 1, Day: 1}
	if today.Month == 12 {
		cycleEnd = Date{Year: today.Year, Month: 1, Day: 1}
	}
	return pyjson.NewObject(
		"line_id", lineID,
		"data_used_gb", l.DataUsedGB,
		"data_limit_gb", p.DataLimitGB,
		"data_refueling_gb", l.DataRefuelingGB,
		"cycle_end_date", cycleEnd.AddDays(-1).String(),
	), nil
}

func (e *view) enableRoaming(k kwargs) (any, error) {
	l, err := e.targetLine(k.get("customer_id", nil), k.get("line_id", nil))
	if err != nil {
		return nil, err
	}
	if l.RoamingEnabled {
		return "Roaming was already enabled", nil
	}
	l.RoamingEnabled = true
	return "Roaming enabled successfully", nil
}

func (e *view) disableRoaming(k kwargs) (any, error) {
	l, err := e.targetLine(k.get("customer_id", nil), k.get("line_id", nil))
	if err != nil {
		return nil, err
	}
	if !l.RoamingEnabled {
		return "Roaming was already disabled", nil
	}
	l.RoamingEnabled = false
	return "Roaming disabled successfully", nil
}

func (e *view) transferToHumanAgents(kwargs) (any, error) {
	return "Transfer successful", nil
}

func (e *view) refuelData(k kwargs) (any, error) {
	cid := k.get("customer_id", nil)
	l, err := e.targetLine(cid, k.get("line_id", nil))
	if err != nil {
		return nil, err
	}
	gb, err := number(k.get("gb_amount", nil), "<=", "int")
	if err != nil {
		return nil, err
	}
	if gb.f <= 0 {
		return nil, fmt.Errorf("Refuel amount must be positive")
	}
	p, err := e.planByID(l.PlanID)
	if err != nil {
		return nil, err
	}
	charge := float64(gb.f * p.DataRefuelingPricePerGB)
	l.DataRefuelingGB = float64(l.DataRefuelingGB + gb.f)
	desc := fmt.Sprintf("Data refueling: %s GB at $%s/GB", pyStr(gb.raw), pyjson.FloatRepr(p.DataRefuelingPricePerGB))
	if err := e.applyOneTimeCharge(cid, charge, desc); err != nil {
		return nil, err
	}
	return pyjson.NewObject(
		"message", fmt.Sprintf("Successfully added %s GB of data for line %s for $%s", pyStr(gb.raw), l.LineID, format2f(charge)),
		"new_data_refueling_gb", l.DataRefuelingGB,
		"charge", charge,
	), nil
}

// applyOneTimeCharge is _apply_one_time_charge: the charge goes on the
// customer's first Draft bill. τ² creates a draft with a random id when none
// exists; here the id is derived deterministically (see newDraftBillID).
func (e *view) applyOneTimeCharge(customerID any, amount float64, desc string) error {
	c, err := e.customerByID(customerID)
	if err != nil {
		return err
	}
	var draft *Bill
	for _, id := range c.BillIDs {
		b, err := e.billByID(id)
		if err != nil {
			return err
		}
		if b.Status == BillDraft {
			draft = b
			break
		}
	}
	if draft == nil {
		next := today.WithDay(1).AddDays(32).WithDay(1)
		endMonth := Date{Year: next.Year, Month: next.Month + 1, Day: 1}
		if next.Month == 12 {
			endMonth = Date{Year: next.Year + 1, Month: 1, Day: 1}
		}
		draft = &Bill{
			BillID:      e.newDraftBillID(),
			CustomerID:  c.CustomerID,
			PeriodStart: next,
			PeriodEnd:   endMonth.AddDays(-1),
			IssueDate:   next,
			TotalDue:    0,
			DueDate:     next.AddDays(14),
			LineItems:   []LineItem{},
			Status:      BillDraft,
		}
		e.db.Bills = append(e.db.Bills, draft)
		c.BillIDs = append(c.BillIDs, draft.BillID)
	}
	itemType := "Charge"
	if amount < 0 {
		itemType = "Credit"
	}
	draft.LineItems = append(draft.LineItems, LineItem{Description: desc, Amount: amount, Date: today, ItemType: itemType})
	draft.TotalDue = float64(draft.TotalDue + amount)
	return nil
}

// newDraftBillID replaces τ²'s f"B{uuid4().hex[:8]}" with a deterministic
// id of the same shape, so replays of one transcript agree. No shipped task
// reaches this branch (customer C1001 always has draft bill B1003).
func (e *view) newDraftBillID() string {
	for n := len(e.db.Bills); ; n++ {
		id := fmt.Sprintf("B%08x", uint32(0x7e1ec000+n))
		if _, err := e.billByID(id); err != nil {
			return id
		}
	}
}

// ---- environment functions (not tools) ----

func (e *view) getAvailablePlanIDs(kwargs) (any, error) {
	out := make([]any, len(e.db.Plans))
	for i, p := range e.db.Plans {
		out[i] = p.PlanID
	}
	return out, nil
}

func (e *view) setDataUsage(k kwargs) (any, error) {
	lineID := k.get("line_id", nil)
	l, err := e.targetLine(k.get("customer_id", nil), lineID)
	if err != nil {
		return nil, err
	}
	v := k.get("data_used_gb", nil)
	n, err := number(v, "=", "float")
	if err != nil {
		return nil, fmt.Errorf("set_data_usage: data_used_gb must be a number, got %s", pyjson.TypeName(v))
	}
	l.DataUsedGB = n.f
	return fmt.Sprintf("Data usage set to %s GB for line %s", pyStr(v), pyStr(lineID)), nil
}

func (e *view) suspendLineForOverdueBill(k kwargs) (any, error) {
	cid, lineID := k.get("customer_id", nil), k.get("line_id", nil)
	newBill := k.get("new_bill_id", nil)
	contractEnded := k.get("contract_ended", nil)
	l, err := e.lineByID(lineID)
	if err != nil {
		return nil, err
	}
	if l.Status != LineActive {
		return nil, fmt.Errorf("Line must be active to suspend for unpaid bill")
	}
	p, err := e.planByID(l.PlanID)
	if err != nil {
		return nil, err
	}
	amount := p.PricePerMonth
	if amount <= 0 {
		return nil, fmt.Errorf("Amount must be positive for overdue bill")
	}
	c, err := e.customerByID(cid)
	if err != nil {
		return nil, err
	}
	for _, id := range c.BillIDs {
		b, err := e.billByID(id)
		if err != nil {
			return nil, err
		}
		if b.Status == BillOverdue {
			return nil, fmt.Errorf("Customer already has an overdue bill")
		}
	}
	billID, ok := newBill.(string)
	if !ok {
		return nil, pyjson.NewValidationError("Bill", []any{"bill_id"}, "Input should be a valid string", "string_type", newBill)
	}
	lastOfPrev := today.WithDay(1).AddDays(-1)
	firstOfPrev := lastOfPrev.WithDay(1)
	bill := &Bill{
		BillID:      billID,
		CustomerID:  c.CustomerID,
		PeriodStart: firstOfPrev,
		PeriodEnd:   lastOfPrev,
		IssueDate:   firstOfPrev,
		DueDate:     firstOfPrev.AddDays(14),
		LineItems:   []LineItem{{Description: "Charge for line " + l.LineID, Amount: amount, Date: today, ItemType: "Charge"}},
		Status:      BillOverdue,
	}
	bill.TotalDue = float64(0 + amount)
	e.db.Bills = append(e.db.Bills, bill)
	c.BillIDs = append(c.BillIDs, billID)
	l.Status = LineSuspended
	d := today
	l.SuspensionStartDate = &d
	if pyTruthy(contractEnded) {
		end := lastOfPrev
		l.ContractEndDate = &end
	}
	return fmt.Sprintf("Line %s suspended for unpaid bill %s. Contract ended: %s", pyStr(lineID), billID, pyStr(contractEnded)), nil
}

func (e *view) assertDataRefuelingAmount(k kwargs) (any, error) {
	l, err := e.targetLine(k.get("customer_id", nil), k.get("line_id", nil))
	if err != nil {
		return nil, err
	}
	n, err := number(k.get("expected_amount", nil), "-", "float")
	if err != nil {
		return nil, fmt.Errorf("unsupported operand type(s) for -: 'float' and '%s'", pyjson.TypeName(k.get("expected_amount", nil)))
	}
	return math.Abs(l.DataRefuelingGB-n.f) < 1e-6, nil
}

func (e *view) assertLineStatus(k kwargs) (any, error) {
	l, err := e.targetLine(k.get("customer_id", nil), k.get("line_id", nil))
	if err != nil {
		return nil, err
	}
	s, ok := k.get("expected_status", nil).(string)
	return ok && s == string(l.Status), nil
}

func (e *view) assertOverdueBillExists(k kwargs) (any, error) {
	cid, bid := k.get("customer_id", nil), k.get("overdue_bill_id", nil)
	c, err := e.customerByID(cid)
	if err != nil {
		return nil, err
	}
	if s, ok := bid.(string); !ok || !slices.Contains(c.BillIDs, s) {
		return nil, fmt.Errorf("Overdue bill %s not found", pyStr(bid))
	}
	b, err := e.billByID(bid)
	if err != nil {
		return nil, err
	}
	if b.Status != BillOverdue {
		return nil, fmt.Errorf("Overdue bill %s is not overdue", pyStr(bid))
	}
	return true, nil
}

func (e *view) assertNoOverdueBill(k kwargs) (any, error) {
	b, err := e.billByID(k.get("overdue_bill_id", nil))
	if err != nil {
		return true, nil
	}
	return b.Status == BillPaid, nil
}

package retail

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"tau2rl/tau2/env"
	"tau2rl/tau2/pycalc"
	"tau2rl/tau2/pyjson"
)

//go:embed tools.json
var schemasJSON string

var schemas = env.MustParseSchemas(schemasJSON)

// Toolkit is RetailTools, tools in τ²'s order (method definition order;
// get_item_details, new in τ² 1.0, sits between get_product_details and
// get_user_details).
var Toolkit = env.MustToolkit("RetailTools", []*env.Tool{
	env.NewTool("calculate", env.Generic, schemas.Get("calculate"), calculate),
	env.NewTool("cancel_pending_order", env.Write, schemas.Get("cancel_pending_order"), cancelPendingOrder),
	env.NewTool("exchange_delivered_order_items", env.Write, schemas.Get("exchange_delivered_order_items"), exchangeDeliveredOrderItems),
	env.NewTool("find_user_id_by_name_zip", env.Read, schemas.Get("find_user_id_by_name_zip"), findUserIDByNameZip),
	env.NewTool("find_user_id_by_email", env.Read, schemas.Get("find_user_id_by_email"), findUserIDByEmail),
	env.NewTool("get_order_details", env.Read, schemas.Get("get_order_details"), getOrderDetails),
	env.NewTool("get_product_details", env.Read, schemas.Get("get_product_details"), getProductDetails),
	env.NewTool("get_item_details", env.Read, schemas.Get("get_item_details"), getItemDetails),
	env.NewTool("get_user_details", env.Read, schemas.Get("get_user_details"), getUserDetails),
	env.NewTool("list_all_product_types", env.Read, schemas.Get("list_all_product_types"), listAllProductTypes),
	env.NewTool("modify_pending_order_address", env.Write, schemas.Get("modify_pending_order_address"), modifyPendingOrderAddress),
	env.NewTool("modify_pending_order_items", env.Write, schemas.Get("modify_pending_order_items"), modifyPendingOrderItems),
	env.NewTool("modify_pending_order_payment", env.Write, schemas.Get("modify_pending_order_payment"), modifyPendingOrderPayment),
	env.NewTool("modify_user_address", env.Write, schemas.Get("modify_user_address"), modifyUserAddress),
	env.NewTool("return_delivered_order_items", env.Write, schemas.Get("return_delivered_order_items"), returnDeliveredOrderItems),
	env.NewTool("transfer_to_human_agents", env.Generic, schemas.Get("transfer_to_human_agents"), transferToHumanAgents),
})

// Order statuses the tools test and set.
const (
	statusPending         = "pending"
	statusDelivered       = "delivered"
	statusCancelled       = "cancelled"
	statusItemModified    = "pending (item modified)"
	statusExchangeRequest = "exchange requested"
	statusReturnRequest   = "return requested"
)

// Lookups (τ²'s _get_order, _get_user, ...): the id is used as a dict key,
// so any hashable value is accepted (and not found unless it is the str
// key) and lists/dicts raise TypeError.

func getOrder(db *RetailDB, id any) (string, *Order, error) {
	k, ok, err := dictKey(id)
	if err != nil {
		return "", nil, err
	}
	if ok {
		if o, found := db.Orders.Get(k); found {
			return k, o, nil
		}
	}
	return "", nil, errors.New("Order not found")
}

func getUser(db *RetailDB, id any) (string, *User, error) {
	k, ok, err := dictKey(id)
	if err != nil {
		return "", nil, err
	}
	if ok {
		if u, found := db.Users.Get(k); found {
			return k, u, nil
		}
	}
	return "", nil, errors.New("User not found")
}

func getProduct(db *RetailDB, id any) (*Product, error) {
	k, ok, err := dictKey(id)
	if err != nil {
		return nil, err
	}
	if ok {
		if p, found := db.Products.Get(k); found {
			return p, nil
		}
	}
	return nil, errors.New("Product not found")
}

// getVariant is _get_variant(product_id, variant_id).
func getVariant(db *RetailDB, productID string, variantID any) (*Variant, error) {
	p, err := getProduct(db, productID)
	if err != nil {
		return nil, err
	}
	k, ok, err := dictKey(variantID)
	if err != nil {
		return nil, err
	}
	if ok {
		if v, found := p.Variants.Get(k); found {
			return v, nil
		}
	}
	return nil, errors.New("Variant not found")
}

// getPaymentMethod is _get_payment_method(user_id, payment_method_id); it
// also returns the method's key.
func getPaymentMethod(db *RetailDB, userID string, methodID any) (string, *PaymentMethod, error) {
	_, u, err := getUser(db, userID)
	if err != nil {
		return "", nil, err
	}
	k, ok, err := dictKey(methodID)
	if err != nil {
		return "", nil, err
	}
	if ok {
		if m, found := u.PaymentMethods.Get(k); found {
			return k, m, nil
		}
	}
	return "", nil, errors.New("Payment method not found")
}

// mutPaymentMethod returns the episode's private copy of a user's payment
// method, for a balance update.
func mutPaymentMethod(db *RetailDB, userID, methodID string) (*PaymentMethod, error) {
	u, ok := db.Users.Mut(userID)
	if !ok {
		return nil, errors.New("User not found")
	}
	m, ok := u.PaymentMethods.Get(methodID)
	if !ok {
		return nil, errors.New("Payment method not found")
	}
	return m, nil
}

// mutOrder returns the episode's private copy of an order.
func mutOrder(db *RetailDB, orderID string) (*Order, error) {
	o, ok := db.Orders.Mut(orderID)
	if !ok {
		return nil, errors.New("Order not found")
	}
	return o, nil
}

// firstItem is next((item for item in order.items if item.item_id == id), None).
func firstItem(o *Order, itemID string) int {
	for i := range o.Items {
		if o.Items[i].ItemID == itemID {
			return i
		}
	}
	return -1
}

// newAddress is UserAddress(address1=..., ..., zip=...) from the tool's
// arguments, with pydantic's validation error for non-str values.
func newAddress(a *env.Args) (UserAddress, error) {
	o := pyjson.NewObject()
	for _, k := range []string{"address1", "address2", "city", "state", "country", "zip"} {
		o.Set(k, a.Raw(k))
	}
	var addr UserAddress
	if err := pyjson.FromValue(o, &addr); err != nil {
		return UserAddress{}, err
	}
	return addr, nil
}

const calcChars = "0123456789+-*/(). "

// calculate is `str(round(float(eval(expression)), 2))` after τ²'s
// character check, which iterates the argument: a list's (or dict's) str
// elements pass when they are substrings of the allowed characters, and
// eval() then rejects the non-str expression.
func calculate(db *RetailDB, a *env.Args) (any, error) {
	expr := a.Raw("expression")
	if s, ok := expr.(string); ok {
		return pycalc.Calculate(s)
	}
	it, err := iterate(expr)
	if err != nil {
		return nil, err
	}
	for _, e := range it.elems {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("'in <string>' requires string as left operand, not %s", pyjson.TypeName(e))
		}
		if !strings.Contains(calcChars, s) {
			return nil, errors.New("Invalid characters in expression")
		}
	}
	return nil, errors.New("eval() arg 1 must be a string, bytes or code object")
}

// cancelPendingOrder refunds every payment (gift cards immediately, balance
// rounded to cents, payment by payment, so a failing lookup leaves earlier
// gift-card refunds applied) and marks the order cancelled.
func cancelPendingOrder(db *RetailDB, a *env.Args) (any, error) {
	orderID, o, err := getOrder(db, a.Raw("order_id"))
	if err != nil {
		return nil, err
	}
	if o.Status != statusPending {
		return nil, errors.New("Non-pending order cannot be cancelled")
	}
	reason, ok, err := dictKey(a.Raw("reason"))
	if err != nil {
		return nil, err
	}
	if !ok || !slices.Contains(cancelReasons, reason) {
		return nil, errors.New("Invalid reason")
	}
	refunds := make([]OrderPayment, 0, len(o.PaymentHistory))
	for _, p := range o.PaymentHistory {
		refunds = append(refunds, OrderPayment{TransactionType: "refund", Amount: p.Amount, PaymentMethodID: p.PaymentMethodID})
		if _, _, err := getUser(db, o.UserID); err != nil {
			return nil, err
		}
		_, m, err := getPaymentMethod(db, o.UserID, p.PaymentMethodID)
		if err != nil {
			return nil, err
		}
		if m.IsGiftCard() {
			m, err := mutPaymentMethod(db, o.UserID, p.PaymentMethodID)
			if err != nil {
				return nil, err
			}
			m.Balance = pycalc.Round2(m.Balance + p.Amount)
		}
	}
	o, err = mutOrder(db, orderID)
	if err != nil {
		return nil, err
	}
	o.Status = statusCancelled
	o.CancelReason = &reason
	o.PaymentHistory = append(o.PaymentHistory, refunds...)
	return o, nil
}

// exchangeDeliveredOrderItems records an exchange request with the price
// difference rounded to cents; no payment is made and no balance changes.
func exchangeDeliveredOrderItems(db *RetailDB, a *env.Args) (any, error) {
	orderID, o, err := getOrder(db, a.Raw("order_id"))
	if err != nil {
		return nil, err
	}
	if o.Status != statusDelivered {
		return nil, errors.New("Non-delivered order cannot be exchanged")
	}
	items, err := iterate(a.Raw("item_ids"))
	if err != nil {
		return nil, err
	}
	if err := checkCounts(items, o, func(it any) error { return fmt.Errorf("Number of %s not found.", pyStr(it)) }); err != nil {
		return nil, err
	}
	newLen, err := pyLen(a.Raw("new_item_ids"))
	if err != nil {
		return nil, err
	}
	if len(items.elems) != newLen {
		return nil, errors.New("The number of items to be exchanged should match.")
	}
	newItems, _ := iterate(a.Raw("new_item_ids"))
	diff := 0.0
	for i, it := range items.elems {
		itemID := it.(string) // checkCounts let only str items through
		j := firstItem(o, itemID)
		if j < 0 {
			return nil, fmt.Errorf("Item %s not found", itemID)
		}
		v, err := getVariant(db, o.Items[j].ProductID, newItems.elems[i])
		if err != nil {
			return nil, err
		}
		if !v.Available {
			return nil, fmt.Errorf("New item %s not found or available", pyStr(newItems.elems[i]))
		}
		diff += v.Price - o.Items[j].Price
	}
	// round(diff_price, 2): a float, or the int 0 when no items were given.
	priceDiff := &Number{Value: pycalc.Round2(diff)}
	if len(items.elems) == 0 {
		priceDiff = intNumber(0)
	}
	methodID, m, err := getPaymentMethod(db, o.UserID, a.Raw("payment_method_id"))
	if err != nil {
		return nil, err
	}
	if m.IsGiftCard() && m.Balance < priceDiff.Value {
		return nil, errors.New("Insufficient gift card balance to pay for the price difference")
	}
	o, err = mutOrder(db, orderID)
	if err != nil {
		return nil, err
	}
	o.Status = statusExchangeRequest
	o.ExchangeItems = sortedStrs(items)
	o.ExchangeNewItems = sortedStrs(newItems)
	o.ExchangePaymentMethodID = &methodID
	o.ExchangePriceDifference = priceDiff
	return o, nil
}

// findUserIDByNameZip returns the first user (DB order) whose first and
// last names match case-insensitively (Python str.lower) and whose zip is
// equal. Like Python's `and`, the last name is only lowered once a first
// name matched, and the zip only compared once both names matched.
func findUserIDByNameZip(db *RetailDB, a *env.Args) (any, error) {
	first, last, zip := a.Raw("first_name"), a.Raw("last_name"), a.Raw("zip")
	var firstLower, lastLower string
	var err error
	firstDone, lastDone := false, false
	for id, u := range db.Users.All() {
		if !firstDone {
			if firstLower, err = pyLowerOf(first); err != nil {
				return nil, err
			}
			firstDone = true
		}
		if !lowerEquals(u.Name.FirstName, firstLower) {
			continue
		}
		if !lastDone {
			if lastLower, err = pyLowerOf(last); err != nil {
				return nil, err
			}
			lastDone = true
		}
		if !lowerEquals(u.Name.LastName, lastLower) {
			continue
		}
		if z, ok := zip.(string); ok && u.Address.Zip == z {
			return id, nil
		}
	}
	return nil, errors.New("User not found")
}

// findUserIDByEmail returns the first user whose email matches
// case-insensitively.
func findUserIDByEmail(db *RetailDB, a *env.Args) (any, error) {
	email := a.Raw("email")
	var lower string
	done := false
	for id, u := range db.Users.All() {
		if !done {
			var err error
			if lower, err = pyLowerOf(email); err != nil {
				return nil, err
			}
			done = true
		}
		if lowerEquals(u.Email, lower) {
			return id, nil
		}
	}
	return nil, errors.New("User not found")
}

func getOrderDetails(db *RetailDB, a *env.Args) (any, error) {
	_, o, err := getOrder(db, a.Raw("order_id"))
	if err != nil {
		return nil, err
	}
	return o, nil
}

func getProductDetails(db *RetailDB, a *env.Args) (any, error) {
	return getProduct(db, a.Raw("product_id"))
}

// getItemDetails is _get_item: the variant of the first product (DB
// order) that has the item id.
func getItemDetails(db *RetailDB, a *env.Args) (any, error) {
	k, ok, err := dictKey(a.Raw("item_id"))
	for _, p := range db.Products.All() {
		if err != nil {
			return nil, err // raised by the first `item_id in product.variants`
		}
		if !ok {
			continue
		}
		if v, found := p.Variants.Get(k); found {
			return v, nil
		}
	}
	return nil, errors.New("Item not found")
}

func getUserDetails(db *RetailDB, a *env.Args) (any, error) {
	_, u, err := getUser(db, a.Raw("user_id"))
	if err != nil {
		return nil, err
	}
	return u, nil
}

// listAllProductTypes is json.dumps({name: product_id}, sort_keys=True)
// (a later product with the same name wins).
func listAllProductTypes(db *RetailDB, a *env.Args) (any, error) {
	m := pyjson.NewObject()
	for _, p := range db.Products.All() {
		m.Set(p.Name, p.ProductID)
	}
	return pyjson.DumpsSorted(m)
}

// modifyPendingOrderAddress replaces the address of an order whose status
// contains "pending" (so "pending (item modified)" qualifies).
func modifyPendingOrderAddress(db *RetailDB, a *env.Args) (any, error) {
	orderID, o, err := getOrder(db, a.Raw("order_id"))
	if err != nil {
		return nil, err
	}
	if !strings.Contains(o.Status, statusPending) {
		return nil, errors.New("Non-pending order cannot be modified")
	}
	addr, err := newAddress(a)
	if err != nil {
		return nil, err
	}
	o, err = mutOrder(db, orderID)
	if err != nil {
		return nil, err
	}
	o.Address = addr
	return o, nil
}

// modifyPendingOrderItems swaps items of a pending order (status exactly
// "pending", so only once). τ² quirks kept: the payment record's amount is
// abs(diff) unrounded; every modified item takes the price and options of
// the LAST new variant validated (Python's loop variable leaks into the
// second loop); items are found by first match, so an item modified by an
// earlier pair can be matched again.
func modifyPendingOrderItems(db *RetailDB, a *env.Args) (any, error) {
	orderID, o, err := getOrder(db, a.Raw("order_id"))
	if err != nil {
		return nil, err
	}
	if o.Status != statusPending {
		return nil, errors.New("Non-pending order cannot be modified")
	}
	items, err := iterate(a.Raw("item_ids"))
	if err != nil {
		return nil, err
	}
	if err := checkCounts(items, o, func(it any) error { return fmt.Errorf("%s not found", pyStr(it)) }); err != nil {
		return nil, err
	}
	newLen, err := pyLen(a.Raw("new_item_ids"))
	if err != nil {
		return nil, err
	}
	if len(items.elems) != newLen {
		return nil, errors.New("The number of items to be exchanged should match")
	}
	newItems, _ := iterate(a.Raw("new_item_ids"))
	diff := 0.0
	var last *Variant
	for i, it := range items.elems {
		itemID := it.(string)
		if s, ok := newItems.elems[i].(string); ok && s == itemID {
			return nil, errors.New("The new item id should be different from the old item id")
		}
		j := firstItem(o, itemID)
		if j < 0 {
			return nil, fmt.Errorf("Item %s not found", itemID)
		}
		v, err := getVariant(db, o.Items[j].ProductID, newItems.elems[i])
		if err != nil {
			return nil, err
		}
		if !v.Available {
			return nil, fmt.Errorf("New item %s not found or available", pyStr(newItems.elems[i]))
		}
		diff += v.Price - o.Items[j].Price
		last = v
	}
	methodID, m, err := getPaymentMethod(db, o.UserID, a.Raw("payment_method_id"))
	if err != nil {
		return nil, err
	}
	if m.IsGiftCard() && m.Balance < diff {
		return nil, errors.New("Insufficient gift card balance to pay for the new item")
	}
	o, err = mutOrder(db, orderID)
	if err != nil {
		return nil, err
	}
	txType := "refund"
	if diff > 0 {
		txType = "payment"
	}
	o.PaymentHistory = append(o.PaymentHistory, OrderPayment{TransactionType: txType, Amount: math.Abs(diff), PaymentMethodID: methodID})
	if m.IsGiftCard() {
		m, err := mutPaymentMethod(db, o.UserID, methodID)
		if err != nil {
			return nil, err
		}
		m.Balance = pycalc.Round2(m.Balance - diff)
	}
	for i, it := range items.elems {
		itemID := it.(string)
		j := firstItem(o, itemID)
		if j < 0 {
			return nil, fmt.Errorf("Item %s not found", itemID)
		}
		o.Items[j].ItemID = newItems.elems[i].(string) // a variant key, so a str
		o.Items[j].Price = last.Price
		o.Items[j].Options = *last.Options.Clone()
	}
	o.Status = statusItemModified
	return o, nil
}

// modifyPendingOrderPayment moves the single payment of a pending order to
// another method: a payment on the new method and a refund on the old one,
// gift-card balances adjusted and rounded to cents.
func modifyPendingOrderPayment(db *RetailDB, a *env.Args) (any, error) {
	orderID, o, err := getOrder(db, a.Raw("order_id"))
	if err != nil {
		return nil, err
	}
	if !strings.Contains(o.Status, statusPending) {
		return nil, errors.New("Non-pending order cannot be modified")
	}
	methodID, m, err := getPaymentMethod(db, o.UserID, a.Raw("payment_method_id"))
	if err != nil {
		return nil, err
	}
	if len(o.PaymentHistory) != 1 || o.PaymentHistory[0].TransactionType != "payment" {
		return nil, errors.New("There should be exactly one payment for a pending order")
	}
	oldID := o.PaymentHistory[0].PaymentMethodID
	if oldID == methodID {
		return nil, errors.New("The new payment method should be different from the current one")
	}
	amount := o.PaymentHistory[0].Amount
	if m.IsGiftCard() && m.Balance < amount {
		return nil, errors.New("Insufficient gift card balance to pay for the order")
	}
	o, err = mutOrder(db, orderID)
	if err != nil {
		return nil, err
	}
	o.PaymentHistory = append(o.PaymentHistory,
		OrderPayment{TransactionType: "payment", Amount: amount, PaymentMethodID: methodID},
		OrderPayment{TransactionType: "refund", Amount: amount, PaymentMethodID: oldID})
	if m.IsGiftCard() {
		m, err := mutPaymentMethod(db, o.UserID, methodID)
		if err != nil {
			return nil, err
		}
		m.Balance = pycalc.Round2(m.Balance - amount)
	}
	_, old, err := getPaymentMethod(db, o.UserID, oldID)
	if err != nil {
		return nil, err
	}
	if old.IsGiftCard() {
		old, err := mutPaymentMethod(db, o.UserID, oldID)
		if err != nil {
			return nil, err
		}
		old.Balance = pycalc.Round2(old.Balance + amount)
	}
	return o, nil
}

func modifyUserAddress(db *RetailDB, a *env.Args) (any, error) {
	userID, _, err := getUser(db, a.Raw("user_id"))
	if err != nil {
		return nil, err
	}
	addr, err := newAddress(a)
	if err != nil {
		return nil, err
	}
	u, ok := db.Users.Mut(userID)
	if !ok {
		return nil, errors.New("User not found")
	}
	u.Address = addr
	return u, nil
}

// returnDeliveredOrderItems records a return request; the refund method
// must be a gift card or the order's original method. No refund is made.
func returnDeliveredOrderItems(db *RetailDB, a *env.Args) (any, error) {
	orderID, o, err := getOrder(db, a.Raw("order_id"))
	if err != nil {
		return nil, err
	}
	if o.Status != statusDelivered {
		return nil, errors.New("Non-delivered order cannot be returned")
	}
	if _, _, err := getUser(db, o.UserID); err != nil {
		return nil, err
	}
	methodID, m, err := getPaymentMethod(db, o.UserID, a.Raw("payment_method_id"))
	if err != nil {
		return nil, err
	}
	if !m.IsGiftCard() {
		if len(o.PaymentHistory) == 0 {
			return nil, errors.New("list index out of range")
		}
		if methodID != o.PaymentHistory[0].PaymentMethodID {
			return nil, errors.New("Payment method should be the original payment method")
		}
	}
	items, err := iterate(a.Raw("item_ids"))
	if err != nil {
		return nil, err
	}
	if err := checkCounts(items, o, func(any) error { return errors.New("Some item not found") }); err != nil {
		return nil, err
	}
	o, err = mutOrder(db, orderID)
	if err != nil {
		return nil, err
	}
	o.Status = statusReturnRequest
	o.ReturnItems = sortedStrs(items)
	o.ReturnPaymentMethodID = &methodID
	return o, nil
}

// transferToHumanAgents accepts a summary of any type (Python never looks
// at it).
func transferToHumanAgents(db *RetailDB, a *env.Args) (any, error) {
	return "Transfer successful", nil
}

// Package retail is τ²'s retail domain (src/tau2/domains/retail): the
// RetailDB data model and the 16 RetailTools with τ²'s exact semantics,
// quirks and Python error texts (see docs/TAU2.md §2.2 and §9.6). It
// registers itself as "retail".
//
// τ² calls a tool as a Python method with the raw JSON arguments and never
// validates them against the schema. This package reproduces what Python
// does with arguments of any JSON type (pyval.go): ids of the wrong type are
// "not found", lists may be strings or dicts (iterated by character or
// key), unhashable values raise TypeError, addresses are validated by
// pydantic. The golden files in testdata/golden come from running the same
// calls through τ²'s own RetailTools (testdata/oracle).
package retail

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
)

// Order statuses, payment transaction types and cancel reasons (τ²
// Literals OrderStatus, OrderPaymentType, CancelReason).
var (
	orderStatuses    = []string{"processed", "pending", "pending (item modified)", "delivered", "cancelled", "exchange requested", "return requested"}
	transactionTypes = []string{"payment", "refund"}
	cancelReasons    = []string{"no longer needed", "ordered by mistake"}
)

// Payment method sources (the discriminating Literal of each union member).
const (
	SourceCreditCard = "credit_card"
	SourceGiftCard   = "gift_card"
	SourcePaypal     = "paypal"
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

func checkLiteral(model string, loc []any, v string, values []string) error {
	if slices.Contains(values, v) {
		return nil
	}
	return pyjson.NewValidationError(model, loc, literalMsg(values), "literal_error", v)
}

// Variant is one purchasable item of a product (an "item id").
type Variant struct {
	ItemID    string             `json:"item_id"`
	Options   pyjson.Map[string] `json:"options"`
	Available bool               `json:"available"`
	Price     float64            `json:"price"`
}

// Product is a product type with its variants by item id (DB order).
type Product struct {
	Name      string               `json:"name"`
	ProductID string               `json:"product_id"`
	Variants  pyjson.Map[*Variant] `json:"variants"`
}

// UserName is a customer's name.
type UserName struct {
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
}

// UserAddress is a postal address (users and orders). The Go type name is
// pydantic's model name in validation errors ("validation error for
// UserAddress").
type UserAddress struct {
	Address1 string `json:"address1"`
	Address2 string `json:"address2"`
	City     string `json:"city"`
	Country  string `json:"country"`
	State    string `json:"state"`
	Zip      string `json:"zip"`
}

// PaymentMethod is the union CreditCard | GiftCard | Paypal, discriminated
// by Source. Credit cards use Brand and LastFour; gift cards use Balance (a
// Python float); PayPal has only source and id.
type PaymentMethod struct {
	Source   string
	ID       string
	Brand    string
	LastFour string
	Balance  float64
}

// IsGiftCard is τ²'s isinstance(payment_method, GiftCard).
func (p *PaymentMethod) IsGiftCard() bool { return p.Source == SourceGiftCard }

// MarshalPy dumps the variant in pydantic field order (source, id, then the
// variant's own fields).
func (p *PaymentMethod) MarshalPy() (any, error) {
	switch p.Source {
	case SourceCreditCard:
		return pyjson.NewObject("source", p.Source, "id", p.ID, "brand", p.Brand, "last_four", p.LastFour), nil
	case SourceGiftCard:
		return pyjson.NewObject("source", p.Source, "id", p.ID, "balance", p.Balance), nil
	case SourcePaypal:
		return pyjson.NewObject("source", p.Source, "id", p.ID), nil
	}
	return nil, fmt.Errorf("retail: unknown payment method source %q", p.Source)
}

type (
	creditCard struct {
		Source   string `json:"source"`
		ID       string `json:"id"`
		Brand    string `json:"brand"`
		LastFour string `json:"last_four"`
	}
	giftCard struct {
		Source  string  `json:"source"`
		ID      string  `json:"id"`
		Balance float64 `json:"balance"`
	}
	paypal struct {
		Source string `json:"source"`
		ID     string `json:"id"`
	}
)

// UnmarshalPy validates the union member selected by source (pydantic's
// smart union picks the only member whose source Literal matches).
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
	case SourceGiftCard:
		var g giftCard
		if err := pyjson.FromValue(v, &g); err != nil {
			return err
		}
		*p = PaymentMethod{Source: g.Source, ID: g.ID, Balance: g.Balance}
	case SourcePaypal:
		var q paypal
		if err := pyjson.FromValue(v, &q); err != nil {
			return err
		}
		*p = PaymentMethod{Source: q.Source, ID: q.ID}
	default:
		return pyjson.NewValidationError("", []any{"source"}, literalMsg([]string{SourceCreditCard, SourceGiftCard, SourcePaypal}), "literal_error", src)
	}
	return nil
}

// User is a retail customer.
type User struct {
	UserID         string                     `json:"user_id"`
	Name           UserName                   `json:"name"`
	Address        UserAddress                `json:"address"`
	Email          string                     `json:"email"`
	PaymentMethods pyjson.Map[*PaymentMethod] `json:"payment_methods"`
	Orders         []string                   `json:"orders"`
}

// OrderFulfillment is one shipment of an order (τ²'s OrderFullfilment).
type OrderFulfillment struct {
	TrackingID []string `json:"tracking_id"`
	ItemIDs    []string `json:"item_ids"`
}

// OrderItem is one item of an order, with the price paid.
type OrderItem struct {
	Name      string             `json:"name"`
	ProductID string             `json:"product_id"`
	ItemID    string             `json:"item_id"`
	Price     float64            `json:"price"`
	Options   pyjson.Map[string] `json:"options"`
}

// OrderPayment is a payment or refund of an order.
type OrderPayment struct {
	TransactionType string  `json:"transaction_type"`
	Amount          float64 `json:"amount"`
	PaymentMethodID string  `json:"payment_method_id"`
}

// Number is the value of a pydantic float field that τ² may assign without
// validation: normally a float, but a Python int when the assigned value
// was one (exchange_delivered_order_items with no items stores round(0, 2)
// = 0, which model_dump() keeps as the int 0). It dumps accordingly.
type Number struct {
	Value float64
	IsInt bool
}

// MarshalPy dumps the int or float.
func (n *Number) MarshalPy() (any, error) {
	if n.IsInt {
		return int64(n.Value), nil
	}
	return n.Value, nil
}

// UnmarshalPy validates a float (pydantic lax float: ints become floats).
func (n *Number) UnmarshalPy(v any) error {
	var f float64
	if err := pyjson.FromValue(v, &f); err != nil {
		return err
	}
	*n = Number{Value: f}
	return nil
}

// intNumber is an int-valued Number; it must be integral and small (it is
// only ever 0 in practice).
func intNumber(x float64) *Number {
	if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		return &Number{Value: x}
	}
	return &Number{Value: x, IsInt: true}
}

// Order is a customer order. Optional fields are set by the write tools.
type Order struct {
	OrderID                 string             `json:"order_id"`
	UserID                  string             `json:"user_id"`
	Address                 UserAddress        `json:"address"`
	Items                   []OrderItem        `json:"items"`
	Status                  string             `json:"status"`
	Fulfillments            []OrderFulfillment `json:"fulfillments"`
	PaymentHistory          []OrderPayment     `json:"payment_history"`
	CancelReason            *string            `json:"cancel_reason" pydantic:"optional"`
	ExchangeItems           []string           `json:"exchange_items" pydantic:"optional"`
	ExchangeNewItems        []string           `json:"exchange_new_items" pydantic:"optional"`
	ExchangePaymentMethodID *string            `json:"exchange_payment_method_id" pydantic:"optional"`
	ExchangePriceDifference *Number            `json:"exchange_price_difference" pydantic:"optional"`
	ReturnItems             []string           `json:"return_items" pydantic:"optional"`
	ReturnPaymentMethodID   *string            `json:"return_payment_method_id" pydantic:"optional"`
}

// RetailDB is τ²'s RetailDB. Its three collections are copy-on-write
// tables: Fork is O(1) and an episode copies only the records it changes.
type RetailDB struct {
	Products pyjson.Table[*Product] `json:"products"`
	Users    pyjson.Table[*User]    `json:"users"`
	Orders   pyjson.Table[*Order]   `json:"orders"`
}

// Fork returns an independent copy-on-write view of the DB.
func (db *RetailDB) Fork() env.DB {
	return &RetailDB{Products: db.Products.Fork(), Users: db.Users.Fork(), Orders: db.Orders.Fork()}
}

// ParseDB validates db.json content into a RetailDB (τ²'s RetailDB.load:
// model_validate with extra keys forbidden at the top level, the Literal
// fields checked).
func ParseDB(text []byte) (*RetailDB, error) {
	raw, err := pyjson.LoadsObject(string(text))
	if err != nil {
		return nil, fmt.Errorf("retail: db: %w", err)
	}
	for _, k := range raw.Keys() {
		if k != "products" && k != "users" && k != "orders" {
			v, _ := raw.Get(k)
			return nil, fmt.Errorf("retail: db: %w", pyjson.NewValidationError("RetailDB", []any{k}, "Extra inputs are not permitted", "extra_forbidden", v))
		}
	}
	var db RetailDB
	if err := pyjson.FromValue(raw, &db); err != nil {
		return nil, fmt.Errorf("retail: db: %w", err)
	}
	for id, o := range db.Orders.All() {
		if err := validateOrder(o); err != nil {
			return nil, fmt.Errorf("retail: db: order %s: %w", id, err)
		}
	}
	return &db, nil
}

func validateOrder(o *Order) error {
	if err := checkLiteral("Order", []any{"status"}, o.Status, orderStatuses); err != nil {
		return err
	}
	for i, p := range o.PaymentHistory {
		if err := checkLiteral("Order", []any{"payment_history", i, "transaction_type"}, p.TransactionType, transactionTypes); err != nil {
			return err
		}
	}
	if o.CancelReason != nil {
		return checkLiteral("Order", []any{"cancel_reason"}, *o.CancelReason, cancelReasons)
	}
	return nil
}

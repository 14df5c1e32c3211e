package retail

import (
	"fmt"
	"testing"

	"tau2rl/producers/tau2/env"
)

func TestTmpSanity(t *testing.T) {
	e, err := env.New("retail", env.Options{})
	if err != nil { t.Fatal(err) }
	a, _, err := e.Hashes()
	fmt.Println(a, err)
	fmt.Println(e.Call("assistant", "find_user_id_by_name_zip", `{"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}`))
	fmt.Println(e.Call("assistant", "get_item_details", `{"item_id": "9612497925"}`))
	fmt.Println(e.Call("assistant", "list_all_product_types", `{}`))
}

"""Writes ../scenarios.json: hand-written call lists (error paths, wrong
argument types, repeated calls, every discoverable tool) that harness.py runs
through upstream's tools for testdata/golden/scenarios.json."""
import json
import sys


def A(_n, **kw):
    return {"requestor": "assistant", "name": _n, "arguments": kw}


def U(_n, **kw):
    return {"requestor": "user", "name": _n, "arguments": kw}


def unlock(n):
    return A("unlock_discoverable_agent_tool", agent_tool_name=n)


def call(n, args):
    return A("call_discoverable_agent_tool", agent_tool_name=n, arguments=args if isinstance(args, str) else json.dumps(args))


def unlock_all(names):
    return [unlock(n) for n in names]


S = []


def sc(name, calls, task=None):
    d = {"name": name, "calls": calls}
    if task:
        d["task"] = task
    S.append(d)


sc("base_reads", [A("get_current_time"), A("get_user_information_by_id", user_id="123"), A("get_user_information_by_id", user_id="nope"),
   A("get_user_information_by_id", user_id='12"3'), A("get_user_information_by_name", customer_name="Mia Smith"),
   A("get_user_information_by_email", email="mia.smith8574@gmail.com"), A("get_referrals_by_user", user_id="123"),
   A("get_credit_card_transactions_by_user", user_id="lj82d4f1a9"), A("get_credit_card_accounts_by_user", user_id="76ad9cc60e"),
   A("list_discoverable_agent_tools"), A("get_user_information_by_id", user_id=123), A("get_user_information_by_id", user_id=None)])
sc("transfer_reasons", [A("transfer_to_human_agents", summary="x"), A("transfer_to_human_agents", summary="x", reason="fraud_or_security_concern"),
   A("transfer_to_human_agents", summary="x", reason="bogus"), A("transfer_to_human_agents", summary="x", reason=None)])
sc("email_and_verification", [A("change_user_email", user_id="123", new_email="a@b.c"), A("change_user_email", user_id="zzz", new_email="a@b.c"),
   A("log_verification", name="Mia Smith", user_id="123", address="742", email="e", phone_number="p", date_of_birth="03/15/1992", time_verified="2025-11-14 03:40:00 EST"),
   A("log_verification", name="Mia Smith", user_id="123", address="742", email="e", phone_number="p", date_of_birth="03/15/1992", time_verified="2025-11-14 03:40:00 EST"),
   A("get_user_information_by_id", user_id="123")])
sc("unlock_and_call_errors", [unlock("nope_1234"), call("get_all_user_accounts_by_user_id_3847", {"user_id": "123"}),
   unlock("get_all_user_accounts_by_user_id_3847"), call("get_all_user_accounts_by_user_id_3847", "{bad json"),
   call("get_all_user_accounts_by_user_id_3847", "[1, 2]"), call("get_all_user_accounts_by_user_id_3847", {}),
   call("get_all_user_accounts_by_user_id_3847", {"user_id": "123", "extra": 1}), call("get_all_user_accounts_by_user_id_3847", {"user_id": "123"}),
   call("get_all_user_accounts_by_user_id_3847", {"user_id": ""}), call("get_all_user_accounts_by_user_id_3847", {"user_id": "nobody"}),
   A("list_discoverable_agent_tools"), A("call_discoverable_agent_tool", agent_tool_name="get_all_user_accounts_by_user_id_3847")])
sc("unlock_texts", unlock_all(["file_debit_card_transaction_dispute_6281", "order_debit_card_5739", "example_agent_tool_0000", "get_payment_history_6183", "initial_transfer_to_human_agent_0218"]) + [call("example_agent_tool_0000", {})])
sc("give_user_tools", [A("give_discoverable_user_tool", discoverable_tool_name="nope"), A("give_discoverable_user_tool", discoverable_tool_name="get_referral_link", arguments='{"bogus": 1}'),
   A("give_discoverable_user_tool", discoverable_tool_name="get_referral_link", arguments='{"user_id": "123", "card_name": "Gold Rewards Card"}'),
   A("give_discoverable_user_tool", discoverable_tool_name="deposit_check_3847"), A("give_discoverable_user_tool", discoverable_tool_name="deposit_check_3847", arguments="not json"),
   U("list_discoverable_user_tools"),
   U("call_discoverable_user_tool", discoverable_tool_name="submit_cash_back_dispute_0589", arguments='{"user_id": "123", "transaction_id": "t"}'),
   U("call_discoverable_user_tool", discoverable_tool_name="get_referral_link", arguments='{"user_id": "123"}'),
   U("call_discoverable_user_tool", discoverable_tool_name="get_referral_link", arguments='{"user_id": "123", "card_name": "Gold Rewards Card", "x": 1}'),
   U("call_discoverable_user_tool", discoverable_tool_name="get_referral_link", arguments='{"user_id": "123", "card_name": "Gold Rewards Card"}'),
   U("call_discoverable_user_tool", discoverable_tool_name="get_referral_link", arguments='{"user_id": "123", "card_name": "Gold Rewards Card"}'),
   U("call_discoverable_user_tool", discoverable_tool_name="deposit_check_3847", arguments='{"account_id": "02", "check_amount": 100}'),
   U("call_discoverable_user_tool", discoverable_tool_name="deposit_check_3847", arguments='{"account_id": "02", "check_amount": "abc"}'),
   U("call_discoverable_user_tool", discoverable_tool_name="deposit_check_3847", arguments='{"account_id": "02", "check_amount": -5}'),
   U("call_discoverable_user_tool", discoverable_tool_name="deposit_check_3847", arguments='{"account_id": "zz", "check_amount": 5.5}'),
   A("give_discoverable_user_tool", discoverable_tool_name="get_card_last_4_digits"),
   U("call_discoverable_user_tool", discoverable_tool_name="get_card_last_4_digits", arguments='{"credit_card_account_id": "cc_76ad9cc60e_gold"}'),
   U("call_discoverable_user_tool", discoverable_tool_name="get_card_last_4_digits", arguments='{"credit_card_account_id": "nope"}'),
   U("list_discoverable_user_tools")])
sc("user_base_tools", [U("apply_for_credit_card", card_type="Gold Rewards Card", customer_name="Mia Smith", annual_income=85000),
   U("apply_for_credit_card", card_type="Gold Rewards Card", customer_name="Mia Smith", annual_income=85000.0),
   U("apply_for_credit_card", card_type="Nope Card", customer_name="Mia Smith", annual_income=1),
   U("apply_for_credit_card", card_type="EcoCard", customer_name="Mia Smith", annual_income="lots"),
   U("apply_for_credit_card", card_type="EcoCard", customer_name="Mia Smith", annual_income="52000", rho_bank_subscription=True),
   U("submit_referral", user_id="123", account_type="checking"), U("submit_referral", user_id="123", account_type="checking"),
   U("request_human_agent_transfer"), U("request_human_agent_transfer"),
   U("submit_transaction", user_id="123", credit_card_type="Silver Rewards Card", merchant_name="Acme", amount=127.43, category="Travel"),
   U("submit_transaction", user_id="123", credit_card_type="Silver Rewards Card", merchant_name="Acme", amount=50, category="Food"),
   U("submit_transaction", user_id="123", credit_card_type="Bogus", merchant_name="Acme", amount=50, category="Food")])
sc("accounts_tools", unlock_all(["open_bank_account_4821", "close_bank_account_7392", "transfer_funds_between_bank_accounts_7291", "apply_checking_account_credit_5829", "apply_savings_account_credit_6831", "get_bank_account_transactions_9173", "submit_interest_discrepancy_report_7294"]) + [
   call("open_bank_account_4821", {"user_id": "123", "account_type": "savings", "account_class": "Bronze Account"}),
   call("open_bank_account_4821", {"user_id": "123", "account_type": "bogus", "account_class": "X"}),
   call("open_bank_account_4821", {"user_id": "125", "account_type": "business_checking", "account_class": "Biz"}),
   call("open_bank_account_4821", {"user_id": "125", "account_type": "business_savings", "account_class": "BizSav"}),
   call("close_bank_account_7392", {"account_id": "01"}), call("close_bank_account_7392", {"account_id": "01"}),
   call("close_bank_account_7392", {"account_id": "02"}), call("close_bank_account_7392", {"account_id": "nope"}),
   call("transfer_funds_between_bank_accounts_7291", {"source_account_id": "03", "destination_account_id": "04", "amount": 100}),
   call("transfer_funds_between_bank_accounts_7291", {"source_account_id": "03", "destination_account_id": "04", "amount": "x"}),
   call("transfer_funds_between_bank_accounts_7291", {"source_account_id": "03", "destination_account_id": "03", "amount": 1}),
   call("transfer_funds_between_bank_accounts_7291", {"source_account_id": "03", "destination_account_id": "04", "amount": 99999}),
   call("apply_checking_account_credit_5829", {"account_id": "03", "amount": 12.5, "credit_type": "fee_refund"}),
   call("apply_checking_account_credit_5829", {"account_id": "04", "amount": 12.5, "credit_type": "fee_refund"}),
   call("apply_checking_account_credit_5829", {"account_id": "03", "amount": 0, "credit_type": "fee_refund"}),
   call("apply_savings_account_credit_6831", {"account_id": "04", "amount": "7.25", "credit_type": "goodwill_credit"}),
   call("apply_savings_account_credit_6831", {"account_id": "04", "amount": 7, "credit_type": "bogus"}),
   call("get_bank_account_transactions_9173", {"account_id": "03"}), call("get_bank_account_transactions_9173", {"account_id": "04"}),
   call("submit_interest_discrepancy_report_7294", {"account_id": "04", "user_id": "125", "expected_apy": 2.775, "actual_apy": 2.5, "amount_difference": 3}),
   call("submit_interest_discrepancy_report_7294", {"account_id": "04", "user_id": "nope", "expected_apy": 2, "actual_apy": 1, "amount_difference": 3})])
sc("debit_tools", unlock_all(["get_debit_cards_by_account_id_7823", "freeze_debit_card_3892", "unfreeze_debit_card_3893", "close_debit_card_4721", "activate_debit_card_8291", "activate_debit_card_8292", "reset_debit_card_pin_6284", "change_debit_card_pin_6285", "order_debit_card_5739", "request_temporary_debit_card_limit_increase_8374", "set_debit_card_recurring_block_7382", "clear_debit_card_fraud_alert_4892"]) + [
   call("get_debit_cards_by_account_id_7823", {"account_id": "chk_lj82d4f1a9"}), call("get_debit_cards_by_account_id_7823", {"account_id": "02"}),
   call("freeze_debit_card_3892", {"card_id": "dbc_538bfb9cba"}), call("freeze_debit_card_3892", {"card_id": "dbc_538bfb9cba"}),
   call("unfreeze_debit_card_3893", {"card_id": "dbc_538bfb9cba"}), call("unfreeze_debit_card_3893", {"card_id": "dbc_538bfb9cba"}),
   call("activate_debit_card_8292", {"card_id": "dbc_7a3f9c2b1e", "last_4_digits": "2847", "expiration_date": "11/29", "cvv": "123", "pin": "5829"}),
   call("activate_debit_card_8291", {"card_id": "dbc_7a3f9c2b1e", "last_4_digits": "2847", "expiration_date": "11/29", "cvv": "123", "pin": "1234"}),
   call("activate_debit_card_8291", {"card_id": "dbc_7a3f9c2b1e", "last_4_digits": "2847", "expiration_date": "11/29", "cvv": "123", "pin": "7777"}),
   call("activate_debit_card_8291", {"card_id": "dbc_7a3f9c2b1e", "last_4_digits": "2848", "expiration_date": "11/29", "cvv": "123", "pin": "5829"}),
   call("activate_debit_card_8291", {"card_id": "dbc_7a3f9c2b1e", "last_4_digits": "2847", "expiration_date": "11/29", "cvv": "12", "pin": "5829"}),
   call("activate_debit_card_8291", {"card_id": "dbc_7a3f9c2b1e", "last_4_digits": "2847", "expiration_date": "11/29", "cvv": "123", "pin": 5829}),
   call("activate_debit_card_8291", {"card_id": "dbc_7a3f9c2b1e", "last_4_digits": "2847", "expiration_date": "11/29", "cvv": "123", "pin": "5829"}),
   call("reset_debit_card_pin_6284", {"card_id": "dbc_kj93a7b2e1_blue", "last_4_digits": "3847", "new_pin": "2580"}),
   call("reset_debit_card_pin_6284", {"card_id": "dbc_kj93a7b2e1_blue", "last_4_digits": "0000", "new_pin": "2580"}),
   call("change_debit_card_pin_6285", {"card_id": "dbc_kj93a7b2e1_blue", "current_pin": "2580", "new_pin": "2580"}),
   call("change_debit_card_pin_6285", {"card_id": "dbc_kj93a7b2e1_blue", "current_pin": "2580", "new_pin": "9517"}),
   call("set_debit_card_recurring_block_7382", {"card_id": "dbc_kj93a7b2e1_blue", "block_recurring": True}),
   call("clear_debit_card_fraud_alert_4892", {"card_id": "dbc_kj93a7b2e1_blue", "reason": "velocity_clear"}),
   call("clear_debit_card_fraud_alert_4892", {"card_id": "dbc_kj93a7b2e1_blue", "reason": "bogus"}),
   call("request_temporary_debit_card_limit_increase_8374", {"card_id": "dbc_kj93a7b2e1_blue", "limit_type": "atm", "new_limit": 600}),
   call("request_temporary_debit_card_limit_increase_8374", {"card_id": "dbc_kj93a7b2e1_blue", "limit_type": "atm", "new_limit": 600.5}),
   call("request_temporary_debit_card_limit_increase_8374", {"card_id": "dbc_kj93a7b2e1_blue", "limit_type": "purchase", "new_limit": 100000}),
   call("close_debit_card_4721", {"card_id": "dbc_kj93a7b2e1_green", "reason": "Fraud_Suspected"}),
   call("close_debit_card_4721", {"card_id": "dbc_kj93a7b2e1_green", "reason": "lost"}),
   call("order_debit_card_5739", {"account_id": "chk_kj93a7b2e1_2", "user_id": "kj93a7b2e1", "delivery_option": "rush", "delivery_fee": 25, "card_design": "premium", "design_fee": 10.5, "shipping_address": "1 Main St", "excess_replacement_fee": 7.5}),
   call("order_debit_card_5739", {"account_id": "03", "user_id": "125", "delivery_option": "STANDARD", "delivery_fee": 0, "card_design": "CLASSIC", "design_fee": 0, "shipping_address": "x"}),
   call("order_debit_card_5739", {"account_id": "03", "user_id": "125", "delivery_option": "SLOW", "delivery_fee": 0, "card_design": "CLASSIC", "design_fee": 0, "shipping_address": "x"})])
sc("credit_tools", unlock_all(["file_credit_card_transaction_dispute_4829", "get_user_dispute_history_7291", "order_replacement_credit_card_7291", "get_pending_replacement_orders_5765", "log_credit_card_closure_reason_4521", "get_closure_reason_history_8293", "apply_statement_credit_8472", "apply_credit_card_account_flag_6147", "close_credit_card_account_7834", "pay_credit_card_from_checking_9182", "submit_credit_limit_increase_request_7392", "get_credit_limit_increase_history_4829", "get_payment_history_6183", "approve_credit_limit_increase_5847", "deny_credit_limit_increase_5848", "update_transaction_rewards_3847", "get_atm_deposit_images_8473", "get_debit_dispute_status_7483"]) + [
   call("file_credit_card_transaction_dispute_4829", {"transaction_id": "txn_8d1aa1219382", "card_action": "keep_active", "card_last_4_digits": "1234", "full_name": "A", "user_id": "lj82d4f1a9", "phone": "p", "email": "e", "address": "a", "contacted_merchant": True, "purchase_date": "11/01/2025", "issue_noticed_date": "11/02/2025", "dispute_reason": "incorrect_amount", "resolution_requested": "partial_refund", "eligible_for_provisional_credit": False, "partial_refund_amount": 12}),
   call("file_credit_card_transaction_dispute_4829", {"transaction_id": "txn_8d1aa1219382", "card_action": "keep_active", "card_last_4_digits": "1234", "full_name": "A", "user_id": "lj82d4f1a9", "phone": "p", "email": "e", "address": "a", "contacted_merchant": True, "purchase_date": "11/01/2025", "issue_noticed_date": "11/02/2025", "dispute_reason": "incorrect_amount", "resolution_requested": "partial_refund", "eligible_for_provisional_credit": False}),
   call("get_user_dispute_history_7291", {"user_id": "lj82d4f1a9"}),
   call("order_replacement_credit_card_7291", {"credit_card_account_id": "cc_76ad9cc60e_gold", "user_id": "76ad9cc60e", "shipping_address": "x", "reason": "damaged", "expedited_shipping": True}),
   call("get_pending_replacement_orders_5765", {"credit_card_account_id": "cc_76ad9cc60e_gold"}),
   call("log_credit_card_closure_reason_4521", {"credit_card_account_id": "cc_6680a37184_silver", "user_id": "6680a37184", "closure_reason": "annual_fee"}),
   call("get_closure_reason_history_8293", {"credit_card_account_id": "cc_6680a37184_silver"}),
   call("apply_statement_credit_8472", {"user_id": "6680a37184", "credit_card_account_id": "cc_6680a37184_silver", "amount": 95, "reason": "annual_fee_reversal"}),
   call("apply_statement_credit_8472", {"user_id": "6680a37184", "credit_card_account_id": "cc_6680a37184_silver", "amount": "95", "reason": "annual_fee_reversal"}),
   call("apply_credit_card_account_flag_6147", {"credit_card_account_id": "cc_6680a37184_silver", "user_id": "6680a37184", "flag_type": "annual_fee_waived", "expiration_date": "11/14/2026", "reason": "retention_offer"}),
   call("pay_credit_card_from_checking_9182", {"user_id": "lj82d4f1a9", "checking_account_id": "chk_lj82d4f1a9", "credit_card_account_id": "cc_lj82d4f1a9_silver", "amount": 10}),
   call("submit_credit_limit_increase_request_7392", {"credit_card_account_id": "cc_76ad9cc60e_gold", "user_id": "76ad9cc60e", "requested_increase_amount": 2500}),
   call("submit_credit_limit_increase_request_7392", {"credit_card_account_id": "cc_76ad9cc60e_gold", "user_id": "76ad9cc60e", "requested_increase_amount": 2500.5}),
   call("get_credit_limit_increase_history_4829", {"credit_card_account_id": "cc_76ad9cc60e_gold"}),
   call("get_payment_history_6183", {"credit_card_account_id": "cc_584f9c5d00_gold", "months": 3}),
   call("get_payment_history_6183", {"credit_card_account_id": "cc_584f9c5d00_gold", "months": "x"}),
   call("approve_credit_limit_increase_5847", {"credit_card_account_id": "cc_6680a37184_silver", "user_id": "6680a37184", "new_credit_limit": 9000}),
   call("deny_credit_limit_increase_5848", {"credit_card_account_id": "cc_6680a37184_silver", "user_id": "6680a37184", "denial_reason": "other"}),
   call("update_transaction_rewards_3847", {"transaction_id": "txn_8d1aa1219382", "new_rewards_earned": "100 points"}),
   call("get_atm_deposit_images_8473", {"transaction_id": "btxn_bd30d42f67a2"}),
   call("get_debit_dispute_status_7483", {"user_id": "kj93a7b2e1"}),
   call("close_credit_card_account_7834", {"credit_card_account_id": "cc_6680a37184_silver", "user_id": "6680a37184"}),
   A("list_discoverable_agent_tools")])

json.dump(S, open(sys.argv[1], "w"), indent=1)

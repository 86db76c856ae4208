"""The shop site (Harbor Market) and its tasks, over HTTP without a browser.

Every task must fail on a fresh episode (doing nothing scores 0) and pass after the HTTP
requests its reference solution stands for (``REPLAYS``); pages render for visitors,
customers and the admin; the admin area is closed to everyone else.
"""

from __future__ import annotations

import html
import json
import re
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentgym.plugins.web.sites.server import SiteClient as Client
from agentgym.plugins.web.sites.server import SiteServer, site_server
from agentgym.plugins.web.sites.shop import SITE, money, parse_money
from agentgym.plugins.web.sites_env import failed_checks

TASK_FILE = (Path(__file__).resolve().parents[3]
             / "agentgym" / "plugins" / "web" / "tasks" / "shop.json")
TASKS = json.loads(TASK_FILE.read_text())
BY_ID = {task["id"]: task for task in TASKS}
CATEGORIES = ("navigate", "search", "form", "settings", "multi-page", "answer", "admin")
ACTIONS = {"click", "fill", "select_option", "press", "goto", "go_back", "send_msg_to_user"}
ROLES = {"link", "button", "textbox", "combobox", "checkbox", "spinbutton", "searchbox",
         "radio", "heading", "option", "tab", "menuitem"}


@pytest.fixture(scope="module")
def server() -> SiteServer:
    return site_server(SITE)


@pytest.fixture
def token(server: SiteServer) -> Iterator[str]:
    token = server.open_episode()
    yield token
    server.close_episode(token)


def grade(server: SiteServer, token: str, task: dict, answer: str | None) -> bool:
    """The task's reward as the gym computes it (its own grader): every check must pass."""
    return not failed_checks(server, token, task["grade"], answer)

def pid(server: SiteServer, token: str, name: str) -> int:
    return server.query(token, "SELECT id FROM products WHERE name = ?", (name,))[0][0]


def address_id(server: SiteServer, token: str, street: str) -> int:
    return server.query(token, "SELECT id FROM addresses WHERE street = ?", (street,))[0][0]


# ---- the HTTP requests each task's reference solution makes ----------------------------------
# A replay gets the client (logged in as the task says) and the episode; it returns the page
# text the answer is read from (for answer tasks) or None.

Replay = Callable[[Client, SiteServer, str], "str | None"]
REPLAYS: dict[str, Replay] = {}


def replay(task_id: str) -> Callable[[Replay], Replay]:
    def register(fn: Replay) -> Replay:
        REPLAYS[task_id] = fn
        return fn
    return register


@replay("shop-nav-kettle-price")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/category/kitchen")
    c.get(f"/product/{pid(s, t, 'Stainless Steel Electric Kettle')}")
    assert "Price: $34.99" in c.text
    return c.text


@replay("shop-nav-kettle-review")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get(f"/product/{pid(s, t, 'Stainless Steel Electric Kettle')}")
    assert re.search(r"Carol Nguyen\s+rated it 2 out of 5", c.text)
    return c.text


@replay("shop-nav-cheapest-office")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/category/office?sort=price_asc")
    first = re.search(r'<tbody><tr><td><a href="/product/\d+">([^<]+)</a>', c.html)
    assert first and first.group(1) == "Whiteboard Marker Set"
    return c.text


@replay("shop-nav-order-total")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/orders")
    assert "Sep 9, 2025" in c.text
    c.get("/orders/1009")
    assert re.search(r"Grand total\s+\$73\.75", c.text)
    return c.text


@replay("shop-search-bamboo-priciest")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/search?q=bamboo&sort=price_desc")
    first = re.search(r'<tbody><tr><td><a href="/product/\d+">([^<]+)</a>', c.html)
    assert first and first.group(1) == "Bamboo Monitor Riser"
    return c.text


@replay("shop-search-lamp-out-of-stock")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/search?q=lamp")
    assert re.search(r"Clip-On Reading Lamp\s+\$15\.25\s+Out of stock", c.text)
    assert c.text.count("Out of stock") == 1
    return c.text


@replay("shop-search-headphones-wishlist")
def _(c: Client, s: SiteServer, t: str) -> None:
    c.get("/search?q=headphones")
    product = pid(s, t, "Wireless Noise-Cancelling Headphones")
    c.get(f"/product/{product}")
    c.post("/wishlist/add", product_id=product, next=f"/product/{product}")
    assert "Remove from wishlist" in c.text


@replay("shop-search-coffee-cart")
def _(c: Client, s: SiteServer, t: str) -> None:
    c.get("/search?q=dark+roast")
    product = pid(s, t, "Dark Roast Coffee Beans 1 lb")
    c.post("/cart/add", product_id=product, quantity=3)
    assert "Cart (3)" in c.text


@replay("shop-form-review-desk-lamp")
def _(c: Client, s: SiteServer, t: str) -> None:
    product = pid(s, t, "Smart LED Desk Lamp")
    c.get(f"/product/{product}")
    c.post(f"/product/{product}/review", rating="4",
           review="Bright light, and the dimmer is handy.")
    assert "Your review was submitted" in c.text


@replay("shop-form-add-address")
def _(c: Client, s: SiteServer, t: str) -> None:
    c.get("/account/addresses")
    c.post("/account/addresses", full_name="Alice Johnson", street="42 Harbor Road",
           city="Portland", zip="97201")


@replay("shop-form-apply-coupon")
def _(c: Client, s: SiteServer, t: str) -> None:
    c.get("/cart")
    c.post("/cart/coupon", coupon="WELCOME10")
    assert "Coupon WELCOME10 applied" in c.text


@replay("shop-form-cancel-order")
def _(c: Client, s: SiteServer, t: str) -> None:
    c.get("/orders/1014")
    c.post("/orders/1014/cancel")
    assert "Your order was cancelled" in c.text


@replay("shop-change-email")
def _(c: Client, s: SiteServer, t: str) -> None:
    c.get("/account")
    c.post("/account", full_name="Alice Johnson", email="alice.new@example.com", newsletter="1")


@replay("shop-settings-newsletter")
def _(c: Client, s: SiteServer, t: str) -> None:
    c.get("/account")
    c.post("/account", full_name="Bob Martinez", email="bob@example.com", newsletter="1")


@replay("shop-settings-password")
def _(c: Client, s: SiteServer, t: str) -> None:
    c.post("/account/password", current_password="dave1234", new_password="BlueHarbor#77",
           confirm_password="BlueHarbor#77")
    assert "Your password was changed" in c.text


@replay("shop-settings-default-address")
def _(c: Client, s: SiteServer, t: str) -> None:
    c.get("/account/addresses")
    c.post(f"/account/addresses/{address_id(s, t, '9 Elm Street')}/default")


def checkout(c: Client, **fields: str) -> None:
    page = c.get("/checkout")
    values = {name: html.unescape(value) for name, value in
              re.findall(r'<input type="text" id="(\w+)" name="\w+" value="([^"]*)"', page)}
    values.pop("site-search", None)
    values.update(shipping="standard")
    values.update(fields)
    c.post("/checkout", **values)
    assert "Thank you for your order" in c.text, c.text


@replay("shop-checkout-skillet-towels")
def _(c: Client, s: SiteServer, t: str) -> None:
    c.post("/cart/add", product_id=pid(s, t, "Cast Iron Skillet 10 inch"), quantity=1)
    c.post("/cart/add", product_id=pid(s, t, "Linen Kitchen Towels (set of 4)"), quantity=2)
    assert "Cart (3)" in c.text
    checkout(c, full_name="Carol Nguyen", street="77 Birch Lane", city="Madison", zip="53705",
             shipping="express")


@replay("shop-checkout-wishlist")
def _(c: Client, s: SiteServer, t: str) -> None:
    c.get("/wishlist")
    for name in ("Chef's Knife 8 inch", "Argan Oil Hair Serum"):
        assert f"Move {name} to cart" in c.text
        c.post("/wishlist/move", product_id=pid(s, t, name))
    assert "Your wishlist is empty" in c.text
    checkout(c)


@replay("shop-reorder-with-coupon")
def _(c: Client, s: SiteServer, t: str) -> None:
    c.get("/orders/1010")
    c.post("/cart/add", product_id=pid(s, t, "Dark Roast Coffee Beans 1 lb"), quantity=3)
    c.post("/cart/add", product_id=pid(s, t, "Wildflower Honey 16 oz"), quantity=1)
    c.post("/cart/coupon", coupon="WELCOME10")
    checkout(c)


@replay("shop-new-address-checkout")
def _(c: Client, s: SiteServer, t: str) -> None:
    c.post("/account/addresses", full_name="Dave Wilson", street="19 Canal Street",
           city="Boulder", zip="80302", is_default="1")
    page = c.get("/checkout")
    assert 'value="19 Canal Street"' in page
    checkout(c, shipping="express")


@replay("shop-answer-bestseller")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/admin/reports/bestsellers")
    assert re.search(r"<tr><td>1</td><td>Sea Salt Dark Chocolate Bar</td>", c.html)
    return c.text


@replay("shop-answer-october-bestseller")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/admin/reports/bestsellers?period=2025-10")
    assert re.search(r"<tr><td>1</td><td>Dark Roast Coffee Beans 1 lb</td>", c.html)
    return c.text


@replay("shop-answer-top-customer")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/admin/customers")
    spent = {m.group(1): parse_money(m.group(2)) for m in re.finditer(
        r"<tr><td>([^<]+)</td>(?:<td>[^<]*</td>){3}<td>(\$[\d,.]+)</td>", c.html)}
    assert max(spent, key=lambda name: spent[name]) == "Bob Martinez"
    assert money(spent["Bob Martinez"]) == "$335.13"
    return c.text


@replay("shop-answer-low-stock")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/admin/reports/low-stock")
    rows = re.findall(r'<a href="/admin/products/\d+">([^<]+)</a></td><td>[^<]+</td>'
                      r"<td>(\d+)</td>", c.html)
    assert sorted(name for name, stock in rows if stock in ("1", "2")) == [
        "10000 mAh Power Bank", "Cork Desk Organizer"]
    return c.text


@replay("shop-admin-speaker-price")
def _(c: Client, s: SiteServer, t: str) -> None:
    c.get("/admin/products?name=speaker")
    product = pid(s, t, "Portable Bluetooth Speaker")
    assert f'href="/admin/products/{product}"' in c.html
    c.get(f"/admin/products/{product}")
    c.post(f"/admin/products/{product}", price="44.99", stock="27", enabled="1")
    assert "The product was saved" in c.text


@replay("shop-admin-power-bank-stock")
def _(c: Client, s: SiteServer, t: str) -> None:
    product = pid(s, t, "10000 mAh Power Bank")
    c.get("/admin/products?name=power+bank")
    c.post(f"/admin/products/{product}", price="24.95", stock="60", enabled="1")


@replay("shop-admin-ship-order")
def _(c: Client, s: SiteServer, t: str) -> None:
    c.get("/admin/orders?status=pending")
    assert "Order #1015" in c.text
    c.post("/admin/orders/1015/status", status="shipped")
    c.post("/admin/orders/1015/comment", comment="Shipped with UPS, tracking 1Z999AA10123456784")
    assert "The comment was added" in c.text


@replay("shop-admin-enable-gift-basket")
def _(c: Client, s: SiteServer, t: str) -> None:
    product = pid(s, t, "Holiday Gift Basket")
    c.get("/admin/products?name=gift+basket")
    c.post(f"/admin/products/{product}", price="59.00", stock="20", enabled="1")


# ---- the task file ---------------------------------------------------------------------------

def test_task_file_is_well_formed() -> None:
    assert len(TASKS) >= 22
    assert len(BY_ID) == len(TASKS), "task ids must be unique"
    counts = Counter(task["category"] for task in TASKS)
    for category in CATEGORIES:
        assert counts[category] >= 3, (category, counts)
    users = {row[0] for row in site_server(SITE).template.execute("SELECT username FROM users")}
    for task in TASKS:
        assert task["site"] == "shop" and task["id"].startswith("shop-")
        assert task["category"] in CATEGORIES
        assert task["goal"].strip() and task["start"].startswith("/")
        assert task["login"] is None or task["login"] in users
        assert task["grade"]["db"] or task["grade"]["answer"], task["id"]
        for check in task["grade"]["db"]:
            assert "order by" in check["sql"].lower() or len(check["expected"]) <= 1, task["id"]
            for row in check["expected"]:
                assert all(isinstance(v, (int, str)) for v in row), task["id"]
        answer = task["grade"]["answer"]
        assert answer is None or set(answer) in ({"exact"}, {"must_include", "kinds"},
                                                 {"must_include", "must_exclude"})
        steps = task["steps"]
        assert steps and steps[-1]["action"] == "send_msg_to_user", task["id"]
        for step in steps:
            assert step["action"] in ACTIONS, step
            if step["action"] in ("click", "fill", "select_option"):
                target = step["target"]
                assert "css" in target or (target["role"] in ROLES and target["name"]), step
            if step["action"] in ("fill", "send_msg_to_user"):
                assert isinstance(step["text"], str)
            if step["action"] == "select_option":
                assert isinstance(step["value"], str)
            if step["action"] == "goto":
                assert step["url"].startswith("/")


def test_every_task_has_a_replay() -> None:
    assert set(REPLAYS) == set(BY_ID)


@pytest.mark.parametrize("task_id", sorted(BY_ID))
def test_task_fails_on_the_seed(server: SiteServer, token: str, task_id: str) -> None:
    task = BY_ID[task_id]
    assert not grade(server, token, task, None)
    assert not grade(server, token, task, "Done")


def test_a_failed_check_says_which_and_what_it_found(server: SiteServer, token: str) -> None:
    grade = {"db": [{"sql": "SELECT count(*) FROM users WHERE username = 'dave'",
                     "expected": [[1]]},
                    {"sql": "SELECT count(*) FROM users WHERE username = 'nobody'",
                     "expected": [[1]]},
                    {"sql": "SELECT id FROM nowhere", "expected": []}],
             "answer": {"exact": "42"}}
    assert failed_checks(server, token, grade, "41") == [
        "db check 2 gave [[0]], expected [[1]]",
        "db check 3 ('SELECT id FROM nowhere') failed: no such table: nowhere",
        "answer '41' is not '42'"]


@pytest.mark.parametrize("task_id", sorted(BY_ID))
def test_task_passes_after_its_solution(server: SiteServer, token: str, task_id: str) -> None:
    task = BY_ID[task_id]
    client = Client(server, token, task["login"])
    client.get(task["start"])
    assert client.status == 200
    page = REPLAYS[task_id](client, server, token)
    answer = task["steps"][-1]["text"]
    spec = task["grade"]["answer"]
    if spec is not None:
        assert page is not None, "an answer task's replay returns the page it reads"
        for phrase in spec.get("must_include", []) + ([spec["exact"]] if "exact" in spec else []):
            assert phrase.lower() in page.lower(), phrase
    assert grade(server, token, task, answer), task_id


# ---- pages -----------------------------------------------------------------------------------

PUBLIC = ["/", "/category/grocery", "/category/office?sort=price_desc", "/search?q=tea",
          "/search?q=", "/search?q=%25", "/product/1", "/product/9", "/login"]
CUSTOMER = [*PUBLIC, "/cart", "/checkout", "/orders", "/orders/1008", "/wishlist", "/account",
            "/account/addresses"]
ADMIN = ["/admin", "/admin/products", "/admin/products?name=bamboo", "/admin/products/41",
         "/admin/orders", "/admin/orders?status=pending", "/admin/orders/1008",
         "/admin/customers", "/admin/reports/bestsellers",
         "/admin/reports/bestsellers?period=2025-06", "/admin/reports/low-stock?threshold=10",
         "/product/41"]


@pytest.mark.parametrize("path", PUBLIC)
def test_pages_render_logged_out(server: SiteServer, token: str, path: str) -> None:
    client = Client(server, token)
    client.get(path)
    assert client.status == 200 and "<main>" in client.html
    assert "Log in" in client.text and "Cart (0)" in client.text


@pytest.mark.parametrize("path", CUSTOMER)
def test_pages_render_for_a_customer(server: SiteServer, token: str, path: str) -> None:
    client = Client(server, token, "dave")
    client.get(path)
    assert client.status == 200, client.html
    assert "Signed in as Dave Wilson" in client.text and "Cart (3)" in client.text
    assert "Admin" not in re.findall(r"<a [^>]*>([^<]*)</a>", client.html)


@pytest.mark.parametrize("path", ADMIN)
def test_pages_render_for_the_admin(server: SiteServer, token: str, path: str) -> None:
    client = Client(server, token, "admin")
    client.get(path)
    assert client.status == 200, client.html


@pytest.mark.parametrize("path", [p for p in ADMIN if p.startswith("/admin")])
@pytest.mark.parametrize("username", [None, "alice"])
def test_admin_is_forbidden_to_others(server: SiteServer, token: str, path: str,
                                      username: str | None) -> None:
    client = Client(server, token, username)
    client.get(path)
    assert client.status == 403 and "Access denied" in client.text


def test_admin_posts_are_forbidden_to_customers(server: SiteServer, token: str) -> None:
    client = Client(server, token, "alice")
    client.post("/admin/products/1", price="0.01", stock="0", enabled="1")
    assert client.status == 403
    client.post("/admin/orders/1001/status", status="cancelled")
    assert client.status == 403
    assert server.query(token, "SELECT price FROM products WHERE id = 1") == [(1499,)]
    assert server.query(token, "SELECT status FROM orders WHERE id = 1001") == [("delivered",)]


@pytest.mark.parametrize("path", ["/product/9999", "/product/41", "/category/toys",
                                  "/no/such/page"])
def test_unknown_pages_are_404(server: SiteServer, token: str, path: str) -> None:
    client = Client(server, token, "alice")
    client.get(path)
    assert client.status == 404


def test_someone_elses_order_is_404(server: SiteServer, token: str) -> None:
    client = Client(server, token, "alice")
    client.get("/orders/1002")
    assert client.status == 404


def test_pages_that_need_a_login_send_to_it(server: SiteServer, token: str) -> None:
    client = Client(server, token)
    for path in ("/cart", "/orders", "/account", "/wishlist", "/checkout"):
        client.get(path)
        assert client.url.startswith("/login?") and "Please log in" in client.text


def test_log_in_and_out(server: SiteServer, token: str) -> None:
    client = Client(server, token)
    client.post("/login", username="bob", password="wrong", next="/orders")
    assert "Invalid username or password" in client.text
    client.post("/login", username="bob", password="bob12345", next="/orders")
    assert client.url == "/orders" and "Order #1014" in client.text
    client.get("/logout")
    assert "You have been logged out" in client.text and "Log in" in client.text
    client.get("/orders")
    assert client.url.startswith("/login")


def test_adding_to_the_cart_logged_out_asks_to_log_in(server: SiteServer, token: str) -> None:
    client = Client(server, token)
    client.post("/cart/add", product_id=1, quantity=1)
    assert client.url.startswith("/login?") and "next=%2Fproduct%2F1" in client.url


def test_search_is_case_insensitive_and_covers_descriptions(server: SiteServer,
                                                            token: str) -> None:
    client = Client(server, token)
    client.get("/search?q=BAMBOO")
    assert "4 products found" in client.text
    client.get("/search?q=sumatran")
    assert "1 product found" in client.text and "Dark Roast Coffee Beans 1 lb" in client.text
    client.get("/search?q=gift")
    assert "Holiday Gift Basket" not in client.text  # disabled


def test_checkout_validates_and_keeps_stock(server: SiteServer, token: str) -> None:
    client = Client(server, token, "dave")
    client.post("/checkout", full_name="", street="1 Main St", city="", zip="12",
                shipping="overnight")
    for error in ("Full name is required.", "City is required.", "ZIP code must be 5 digits.",
                  "Please choose a shipping method."):
        assert error in client.text
    assert 'value="1 Main St"' in client.html
    honey = pid(server, token, "Wildflower Honey 16 oz")
    client.post("/cart/add", product_id=honey, quantity=500)
    assert "not enough units in stock" in client.text
    client.post("/cart/coupon", coupon="SUMMER25")
    assert "This coupon has expired" in client.text
    client.post("/cart/coupon", coupon="welcome10")
    checkout(client, shipping="express")
    order = server.query(token, "SELECT subtotal, discount, shipping, total FROM orders"
                                " WHERE id = 1017")
    assert order == [(2923, 292, 1500, 4131)]  # 11.25 + 2 x 8.99, 10% off, express
    assert server.query(token, "SELECT stock FROM products WHERE id = ?", (honey,)) == [(21,)]
    assert server.query(token, "SELECT COUNT(*) FROM cart_items WHERE user_id = 5") == [(0,)]
    client.get("/orders/1017")
    assert "Discount (WELCOME10)" in client.text and "Cancel order" in client.text


def test_cart_update_and_remove(server: SiteServer, token: str) -> None:
    client = Client(server, token, "dave")
    honey = pid(server, token, "Wildflower Honey 16 oz")
    pens = pid(server, token, "Gel Ink Pens (12 pack)")
    client.get("/cart")
    update_form = re.search(r'<form method="post" action="/cart/update">.*?</form>', client.html,
                            re.S)
    # Enter in a quantity field submits the form's first own submit button: "Update cart"
    # (the Remove buttons in its table belong to other forms through form=...).
    assert update_form
    buttons = re.findall(r"<button([^>]*)>([^<]*)</button>", update_form.group(0))
    assert [text for attrs, text in buttons if "form=" not in attrs] == ["Update cart"]
    assert re.findall(r'<button type="submit" form="remove-\d+">([^<]+)</button>',
                      client.html) == ["Remove Gel Ink Pens (12 pack)",
                                       "Remove Wildflower Honey 16 oz"]
    client.post("/cart/update", **{f"qty_{honey}": "4", f"qty_{pens}": "0"})
    assert "Cart (4)" in client.text
    client.post("/cart/remove", product_id=honey)
    assert "Your shopping cart is empty" in client.text


def test_account_form_errors(server: SiteServer, token: str) -> None:
    client = Client(server, token, "alice")
    client.post("/account", full_name="Alice Johnson", email="not-an-email", newsletter="1")
    assert "Please enter a valid email address." in client.text
    client.post("/account", full_name="Alice Johnson", email="bob@example.com")
    assert "Another account already uses this email address." in client.text
    client.post("/account/password", current_password="nope", new_password="abcdefgh1",
                confirm_password="abcdefgh2")
    assert "The current password is incorrect." in client.text
    assert server.query(token, "SELECT email, password FROM users WHERE username = 'alice'"
                        ) == [("alice@example.com", "alice1234")]


def test_admin_cancelling_an_order_restocks_it(server: SiteServer, token: str) -> None:
    client = Client(server, token, "admin")
    keyboard = pid(server, token, "Mechanical Keyboard")
    client.post("/admin/orders/1005/status", status="processing")  # un-cancel: takes stock
    assert server.query(token, "SELECT stock FROM products WHERE id = ?", (keyboard,)) == [(6,)]
    client.post("/admin/orders/1005/status", status="cancelled")
    assert server.query(token, "SELECT stock FROM products WHERE id = ?", (keyboard,)) == [(7,)]
    client.post("/admin/products/1", price="abc", stock="-1")
    assert "Price must be an amount of money" in client.text
    assert "Stock must be a whole number" in client.text


def test_episodes_are_isolated(server: SiteServer) -> None:
    first, second = server.open_episode(), server.open_episode()
    try:
        Client(server, first, "alice").post("/orders/1013/cancel")
        Client(server, first, "bob").post("/orders/1014/cancel")
        assert server.query(first, "SELECT status FROM orders WHERE id = 1014") == [
            ("cancelled",)]
        assert server.query(second, "SELECT status FROM orders WHERE id = 1014") == [
            ("pending",)]
    finally:
        server.close_episode(first)
        server.close_episode(second)


def test_the_seed_is_deterministic() -> None:
    dumps = []
    for _ in range(2):
        db = sqlite3.connect(":memory:")
        db.row_factory = sqlite3.Row
        SITE.build(db)
        dumps.append(list(db.iterdump()))
        db.close()
    assert dumps[0] == dumps[1]


def test_money() -> None:
    assert money(123456) == "$1,234.56" and money(-500) == "-$5.00" and money(7) == "$0.07"
    assert parse_money("$1,234.5") == 123450 and parse_money("44.99") == 4499
    assert parse_money("abc") is None and parse_money("1.234") is None


@pytest.mark.parametrize(("username", "paths"), [(None, PUBLIC), ("dave", CUSTOMER),
                                                 ("admin", [*ADMIN, "/cart", "/checkout"])])
def test_form_controls_have_labels(server: SiteServer, token: str, username: str | None,
                                   paths: list[str]) -> None:
    client = Client(server, token, username)
    if username == "admin":
        client.post("/cart/add", product_id=1, quantity=1)
    for path in paths:
        page = client.get(path)
        ids = re.findall(r'\sid="([^"]+)"', page)
        assert len(ids) == len(set(ids)), (path, ids)
        labelled = set(re.findall(r'<label for="([^"]+)"', page))
        wrapped = set(re.findall(r'<label><input [^>]*id="([^"]+)"', page))
        for tag, attrs in re.findall(r"<(input|select|textarea)(\s[^>]*)>", page):
            if 'type="hidden"' in attrs:
                continue
            field_id = re.search(r'id="([^"]+)"', attrs)
            assert field_id and field_id.group(1) in labelled | wrapped, (path, tag, attrs)
        for name in re.findall(r"<button[^>]*>([^<]*)</button>", page):
            assert name.strip(), path


def test_entry_url_sets_the_episode_cookies_and_refuses_strangers() -> None:
    """The first page load of an episode goes through the entry URL: it sets the episode's
    (and the login's) cookies and redirects to a path on the site, never elsewhere."""
    server = site_server(SITE)
    token = server.open_episode()
    try:
        session = server.log_in(token, "alice")
        url = server.entry_url(token, "/account", session)
        client = Client(server, None)
        client.request("GET", url.removeprefix(server.base_url), follow=False)
        assert client.status == 303 and client.headers["Location"] == "/account"
        assert client.cookies == {server.cookie_name: token, SITE.session_cookie: session}
        client.request("GET", server.entry_url("not-a-token", "/").removeprefix(server.base_url))
        assert client.status == 403
        for outside in ("//example.com/", "http://example.com/"):
            client.request("GET", server.entry_url(token, outside).removeprefix(server.base_url))
            assert client.status == 403, outside
        client.request("GET", "/")  # the cookies of the first request, without its query
        assert client.status == 200 and "Signed in as Alice Johnson" in client.text
    finally:
        server.close_episode(token)


def test_a_request_without_an_episode_is_refused(server: SiteServer) -> None:
    client = Client(server, None)
    for path in ("/", "/cart", "/no/such/page"):
        client.get(path)
        assert client.status == 403 and "No episode" in client.text, path


def test_pages_are_not_cached_and_wrong_methods_are_405(server: SiteServer, token: str) -> None:
    client = Client(server, token)
    client.get("/")
    assert client.headers["Cache-Control"] == "no-store"
    client.get("/cart/add")
    assert client.status == 405

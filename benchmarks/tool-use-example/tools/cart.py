"""A shopping cart: one instance per rollout, so what one call adds the next one sees."""

PRICES = {"apple": 0.5, "pear": 0.75, "milk": 1.2, "bread": 2.0}


class Cart:
    def __init__(self, prices: dict | None = None) -> None:
        self.prices = dict(prices or PRICES)
        self.items: dict[str, int] = {}

    def add_item(self, name: str, quantity: int = 1) -> dict:
        if name not in self.prices:
            raise KeyError(f"no product {name!r}; products: {', '.join(sorted(self.prices))}")
        if not isinstance(quantity, int) or quantity < 1:
            raise ValueError("quantity must be a whole number >= 1")
        self.items[name] = self.items.get(name, 0) + quantity
        return {"name": name, "quantity": self.items[name]}

    def list_items(self) -> dict:
        total = sum(self.prices[n] * q for n, q in self.items.items())
        return {"items": dict(self.items), "total": round(total, 2)}

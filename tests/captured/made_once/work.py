from lexing import Lexer, Template

lexer = Lexer()
page = Template("{name} has {count} items")
for i in range(30):
    print(lexer.lex(f"item {i} costs {i * 3} and x{i}"), page.render(name=f"n{i}", count=i))
